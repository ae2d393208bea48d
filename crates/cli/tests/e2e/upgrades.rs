//! Upgraded connections through each provider: a WebSocket echo over HTTP/1.1 `Upgrade` that
//! outlives configuration changes, and the same over HTTP/2 extended CONNECT (RFC 8441).

use crate::conformance::Provider;
use crate::support::*;
use crate::websocket::{echo_backend, handshake, read_frame, round_trip, write_frame};
use bytes::Bytes;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

proxy_and_haproxy!(
    a_websocket_echo_survives_20_configuration_changes_made_while_it_is_open,
    a_websocket_opens_over_http2_extended_connect,
);

const HOST: &str = "ws.test";

async fn start(provider: Provider, dir: &Path) -> Portico {
    match provider {
        Provider::Haproxy => Portico::start_haproxy(dir, &[]).await,
        _ => Portico::start(dir, &[]).await,
    }
}

/// `ws.test` → the WebSocket echo backend (Service `chat`); echo Service `web` for the
/// Ingresses the test adds.
async fn manifests() -> Manifests {
    let m = crate::backends("ws", &[("web", 1)]).await;
    let chat = service("ws", "chat", &ready(&[echo_backend().await]));
    let rules = [(HOST, "/", "Prefix", "chat", "80")];
    let chat_ingress = ingress("ws", "chat", "2026-01-01T00:00:00Z", &rules);
    m.write("chat.yaml", &format!("{chat}{chat_ingress}"));
    m
}

async fn a_websocket_echo_survives_20_configuration_changes_made_while_it_is_open(
    provider: Provider,
) {
    let m = manifests().await;
    let p = start(provider, m.path()).await;
    let mut ws = TcpStream::connect(p.http).await.unwrap();
    handshake(&mut ws, HOST, "/chat").await.unwrap();
    let hello = round_trip(&mut ws, "hello").await;
    assert_eq!(hello.as_deref(), Some("echo: hello"));
    let opened = Instant::now();
    for i in 1..=20 {
        // A new host each time: a new route table for the proxy, a reload for haproxy.
        let host = format!("change-{i}.test");
        let rules = [(host.as_str(), "/", "Prefix", "web", "80")];
        m.write(
            "change.yaml",
            &ingress("ws", "change", "2026-01-02T00:00:00Z", &rules),
        );
        p.wait_route(&host, "/", 200, "web").await;
        let text = format!("message {i}");
        let echoed = round_trip(&mut ws, &text).await;
        assert_eq!(echoed, Some(format!("echo: {text}")), "after change {i}");
    }
    eprintln!(
        "{provider:?}: the WebSocket carried 21 messages across 20 changes in {:?}",
        opened.elapsed()
    );
}

async fn a_websocket_opens_over_http2_extended_connect(provider: Provider) {
    let m = manifests().await;
    let p = start(provider, m.path()).await;
    let tcp = TcpStream::connect(p.http).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.unwrap();
    // The server's SETTINGS (with ENABLE_CONNECT_PROTOCOL) arrive after the handshake.
    let deadline = Instant::now() + Duration::from_secs(2);
    while !client.is_extended_connect_protocol_enabled() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        client.is_extended_connect_protocol_enabled(),
        "SETTINGS_ENABLE_CONNECT_PROTOCOL"
    );
    let req = http::Request::builder()
        .method("CONNECT")
        .uri(format!("http://{HOST}/chat"))
        .header("sec-websocket-version", "13")
        .extension(h2::ext::Protocol::from_static("websocket"))
        .body(())
        .unwrap();
    let (response, mut send) = client.send_request(req, false).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200, "{response:?}");
    let mut recv = response.into_body();
    for i in 0..3 {
        let text = format!("over h2 {i}");
        let mut frame = Vec::new();
        write_frame(&mut frame, &text, true).await.unwrap();
        send.send_data(Bytes::from(frame), false).unwrap();
        let mut got = Vec::new();
        let echoed = loop {
            let chunk = tokio::time::timeout(Duration::from_secs(5), recv.data())
                .await
                .expect("an echo in time")
                .expect("the stream is open")
                .unwrap();
            let _ = recv.flow_control().release_capacity(chunk.len());
            got.extend_from_slice(&chunk);
            if let Some(text) = read_frame(&mut got.as_slice()).await {
                break text;
            }
        };
        assert_eq!(echoed, format!("echo: {text}"));
    }
}
