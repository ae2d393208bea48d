//! Response compression through the real binary: gzip, Brotli and zstd chosen by
//! `Accept-Encoding` and its q-values, each decoding to the exact body the member sent; the
//! responses left as they are (small, images, already encoded, ranges, `no-transform`); `Vary`;
//! `--compression off` and an Ingress's own `portico.dev/compression`; a response that streams
//! goes out compressed before the member has finished; haproxy compresses with gzip.

use crate::conformance::Provider;
use crate::support::*;
use bytes::Bytes;
use http_body_util::BodyExt;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

proxy_and_haproxy!(gzip_is_served_and_what_must_stay_plain_does);

const NS: &str = "compression";

/// The body of `/text`: 40 KB of text.
fn text() -> String {
    (0..1000)
        .map(|i| format!("line {i:04} of a compressible body\n"))
        .collect()
}

/// A member answering by path: `/text` (text/plain, with a length), `/small` (40 bytes),
/// `/png`, `/encoded` (already gzip), `/range` (206), `/kept` (`no-transform`), `/stream`
/// (chunked: half the text, then the rest once `go` is notified). One request a connection.
async fn member(go: Arc<Notify>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let go = go.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(n @ 1..) => seen.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let head = String::from_utf8_lossy(&seen).into_owned();
                let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
                let plain = |ty: &str, extra: &str, body: &[u8]| {
                    let mut out = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: {ty}\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    out.extend_from_slice(body);
                    out
                };
                let text = text();
                let answer = match path.as_str() {
                    "/small" => plain("text/plain", "", &text.as_bytes()[..40]),
                    "/png" => plain("image/png", "", text.as_bytes()),
                    "/encoded" => {
                        plain("text/plain", "content-encoding: gzip\r\n", text.as_bytes())
                    }
                    "/kept" => plain(
                        "text/plain",
                        "cache-control: no-transform\r\n",
                        text.as_bytes(),
                    ),
                    "/range" => {
                        let mut out = plain(
                            "text/plain",
                            "content-range: bytes 0-39999/80000\r\n",
                            text.as_bytes(),
                        );
                        out.splice(9..15, b"206 Partial Content".iter().copied());
                        out
                    }
                    "/stream" => {
                        let half = text.len() / 2;
                        let chunk = |part: &str| format!("{:x}\r\n{part}\r\n", part.len());
                        let first = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n{}",
                            chunk(&text[..half])
                        );
                        if stream.write_all(first.as_bytes()).await.is_err() {
                            return;
                        }
                        go.notified().await;
                        format!("{}0\r\n\r\n", chunk(&text[half..])).into_bytes()
                    }
                    _ => plain(
                        "text/plain; charset=utf-8",
                        "etag: \"v1\"\r\n",
                        text.as_bytes(),
                    ),
                };
                let _ = stream.write_all(&answer).await;
            });
        }
    });
    addr
}

fn decode(coding: &str, data: &[u8]) -> String {
    String::from_utf8(portico_testkit::decode(coding, data)).unwrap()
}

async fn manifests(go: Arc<Notify>) -> Manifests {
    let m = Manifests::new();
    let addr = member(go).await;
    m.write("member.yaml", &service(NS, "member", &ready(&[addr])));
    let rules = [("zip.test", "/", "Prefix", "member", "80")];
    m.write(
        "ing.yaml",
        &ingress(NS, "zip", "2026-01-01T00:00:00Z", &rules),
    );
    let own = [("gz.test", "/", "Prefix", "member", "80")];
    let own = ingress(NS, "gz", "2026-01-01T00:00:00Z", &own);
    m.write(
        "gz.yaml",
        &annotated(&own, &[("portico.dev/compression", "gzip")]),
    );
    m
}

async fn get(p: &Portico, host: &str, path: &str, accept: &str) -> Reply {
    let headers: &[(&str, &str)] = if accept.is_empty() {
        &[]
    } else {
        &[("accept-encoding", accept)]
    };
    p.request(p.http, "GET", host, path, headers, "")
        .await
        .unwrap()
}

fn field<'a>(reply: &'a Reply, name: &str) -> Option<&'a str> {
    reply.headers.get(name).map(|v| v.to_str().unwrap())
}

#[tokio::test]
async fn each_coding_is_chosen_by_accept_encoding_and_decodes_to_the_body() {
    let m = manifests(Arc::new(Notify::new())).await;
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("zip.test", "/", 200, "").await;
    for (accept, coding) in [
        ("gzip, deflate, br, zstd", "zstd"),
        ("gzip, br", "br"),
        ("gzip", "gzip"),
        ("br;q=0.5, gzip;q=0.9", "gzip"),
        ("*", "zstd"),
    ] {
        let reply = get(&p, "zip.test", "/text", accept).await;
        assert_eq!(field(&reply, "content-encoding"), Some(coding), "{accept}");
        assert_eq!(field(&reply, "vary"), Some("accept-encoding"));
        assert_eq!(field(&reply, "etag"), Some("W/\"v1\""));
        assert!(field(&reply, "content-length").is_none_or(|l| l != "40000"));
        assert!(
            reply.body.len() < 40_000 / 4,
            "{coding}: {} bytes",
            reply.body.len()
        );
        assert_eq!(decode(coding, &reply.body), text(), "{accept}");
    }
    // Nothing accepted: the body as it is, with Vary all the same.
    for accept in ["", "identity", "gzip;q=0, br;q=0, zstd;q=0"] {
        let reply = get(&p, "zip.test", "/text", accept).await;
        assert_eq!(field(&reply, "content-encoding"), None, "{accept:?}");
        assert_eq!(field(&reply, "vary"), Some("accept-encoding"));
        assert_eq!(reply.body, text().as_bytes());
    }
    // An Ingress's own list: gzip only, whatever else the client accepts.
    let reply = get(&p, "gz.test", "/text", "zstd, br, gzip").await;
    assert_eq!(field(&reply, "content-encoding"), Some("gzip"));
    assert_eq!(decode("gzip", &reply.body), text());
    let reply = get(&p, "gz.test", "/text", "zstd, br").await;
    assert_eq!(field(&reply, "content-encoding"), None);
    drop(p);

    let p = Portico::start(m.path(), &["--compression", "off"]).await;
    p.wait_route("zip.test", "/", 200, "").await;
    let reply = get(&p, "zip.test", "/text", "gzip, br, zstd").await;
    assert_eq!(
        (field(&reply, "content-encoding"), field(&reply, "vary")),
        (None, None)
    );
    assert_eq!(reply.body, text().as_bytes());
    // The Ingress's own list still applies to its routes.
    let reply = get(&p, "gz.test", "/text", "gzip").await;
    assert_eq!(field(&reply, "content-encoding"), Some("gzip"));
}

#[tokio::test]
async fn a_streaming_response_goes_out_compressed_before_the_member_finishes() {
    let go = Arc::new(Notify::new());
    let m = manifests(go.clone()).await;
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("zip.test", "/", 200, "").await;
    let tcp = tokio::net::TcpStream::connect(p.http).await.unwrap();
    let io = hyper_util::rt::TokioIo::new(tcp);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(conn);
    let req = http::Request::get("/stream")
        .header("host", "zip.test")
        .header("accept-encoding", "gzip")
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(req).await.unwrap();
    assert_eq!(response.headers()["content-encoding"], "gzip");
    let mut body = response.into_body();
    // The member has sent half and waits: what arrives now must decode to that half.
    let half = text().len() / 2;
    let mut decoder = flate2::write::GzDecoder::new(Vec::new());
    let mut received = Vec::new();
    while decoder.get_ref().len() < half {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(5), body.frame())
            .await
            .expect("the first half came before the member finished")
            .unwrap()
            .unwrap();
        if let Ok(data) = frame.into_data() {
            std::io::Write::write_all(&mut decoder, &data).unwrap();
            // The decoder hands what it decoded to its Vec on a flush (or the next write).
            std::io::Write::flush(&mut decoder).unwrap();
            received.extend_from_slice(&data);
        }
    }
    assert_eq!(decoder.get_ref()[..], text().as_bytes()[..half]);
    go.notify_one();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            received.extend_from_slice(&data);
        }
    }
    assert_eq!(decode("gzip", &received), text());
}

async fn gzip_is_served_and_what_must_stay_plain_does(provider: Provider) {
    let m = manifests(Arc::new(Notify::new())).await;
    let p = provider.start_with(m.path(), &[]).await;
    p.wait_route("zip.test", "/", 200, "").await;
    let reply = get(&p, "zip.test", "/text", "gzip").await;
    assert_eq!(field(&reply, "content-encoding"), Some("gzip"));
    assert_eq!(decode("gzip", &reply.body), text());
    for path in ["/small", "/png", "/kept", "/range"] {
        // haproxy 2.6 has no minimum size (`compression minsize-res` came later).
        if matches!(provider, Provider::Haproxy) && path == "/small" {
            continue;
        }
        let reply = get(&p, "zip.test", path, "gzip, br, zstd").await;
        assert_eq!(field(&reply, "content-encoding"), None, "{path}");
    }
    let reply = get(&p, "zip.test", "/encoded", "gzip, br, zstd").await;
    assert_eq!(
        field(&reply, "content-encoding"),
        Some("gzip"),
        "kept as sent"
    );
    assert_eq!(reply.body, text().as_bytes(), "not compressed twice");
}
