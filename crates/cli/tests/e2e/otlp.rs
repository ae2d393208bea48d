//! OpenTelemetry tracing through the real binary (`--otlp-endpoint`): a collector on
//! loopback (OTLP/HTTP, protobuf decoded with opentelemetry-proto) receives one span per
//! sampled request, a child of the client's `traceparent`; the member gets the proxy's span's
//! `traceparent` and the client's `tracestate`; an unsampled parent gives no span but is
//! propagated; the access log has the trace id. Without the flag, headers pass untouched and
//! the collector hears nothing. Both request paths: GET (the own HTTP/1.1 path) and POST with
//! `Expect: 100-continue` (hyper's).

use crate::backends;
use crate::support::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// The spans a collector received, and how many export requests it answered.
#[derive(Default)]
struct Received {
    spans: Vec<Span>,
    posts: usize,
}

/// An OTLP/HTTP collector on loopback: decodes each POST's `ExportTraceServiceRequest`.
async fn collector() -> (SocketAddr, Arc<Mutex<Received>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received: Arc<Mutex<Received>> = Arc::default();
    let record = received.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let record = record.clone();
                    async move {
                        assert_eq!(req.uri().path(), "/v1/traces");
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let export = ExportTraceServiceRequest::decode(body).unwrap();
                        let mut seen = record.lock().unwrap();
                        seen.posts += 1;
                        let spans = export.resource_spans.into_iter();
                        let spans = spans.flat_map(|r| r.scope_spans).flat_map(|s| s.spans);
                        seen.spans.extend(spans);
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, received)
}

/// Service `web` (one echo pod) behind `web.test/`.
async fn web() -> Manifests {
    let m = backends("tr", &[]).await;
    let pod = echo_pods("web", 1).await[0];
    m.write("backends.yaml", &service("tr", "web", &ready(&[pod])));
    let rules = [("web.test", "/", "Prefix", "web", "80")];
    m.write(
        "ing.yaml",
        &ingress("tr", "web", "2026-01-01T00:00:00Z", &rules),
    );
    m
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attribute(span: &Span, key: &str) -> String {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    let found = span.attributes.iter().find(|a| a.key == key);
    match found.and_then(|a| a.value.as_ref()?.value.clone()) {
        Some(Value::StringValue(s)) => s,
        Some(Value::IntValue(i)) => i.to_string(),
        other => format!("{other:?}"),
    }
}

/// The spans of `path` received within 5 s (and another moment, for a second one to show).
async fn spans_for(received: &Mutex<Received>, path: &str) -> Vec<Span> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let of = |received: &Mutex<Received>| -> Vec<Span> {
        let seen = received.lock().unwrap();
        let spans = seen
            .spans
            .iter()
            .filter(|s| attribute(s, "url.path") == path);
        spans.cloned().collect()
    };
    while of(received).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    of(received)
}

/// The member's `traceparent` (the echo reply's), split: version, trace id, span id, flags.
fn sent_upstream(reply: &Reply) -> Vec<String> {
    let json = reply.json();
    let value = json["headers"]["traceparent"].as_str().unwrap_or("");
    value.split('-').map(str::to_owned).collect()
}

#[tokio::test]
async fn a_span_per_request_child_of_the_clients_and_the_member_sees_the_proxys() {
    let (collector, received) = collector().await;
    let m = web().await;
    let log = m.path().join("access.log");
    let flags = [
        format!("--otlp-endpoint=http://{collector}/v1/traces"),
        format!("--access-log={}", log.display()),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let p = Portico::start(m.path(), &flags).await;
    p.wait_route("web.test", "/ready", 200, "web").await;
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    // GET: the own HTTP/1.1 path; POST with `Expect`: hyper's.
    for (method, path, body) in [("GET", "/own", ""), ("POST", "/hyper", "12345")] {
        let mut headers = vec![
            ("traceparent", traceparent.as_str()),
            ("tracestate", "vendor=opaque"),
        ];
        if !body.is_empty() {
            headers.push(("expect", "100-continue"));
        }
        let reply = p
            .request(p.http, method, "web.test", path, &headers, body)
            .await
            .unwrap();
        assert_eq!(reply.status, 200, "{method}");
        let echoed = &reply.json()["headers"];
        assert_eq!(echoed["tracestate"], "vendor=opaque", "{method}: {echoed}");
        let upstream = sent_upstream(&reply);
        assert_eq!(upstream.len(), 4, "{method}: {echoed}");
        assert_eq!((&*upstream[0], &*upstream[1]), ("00", TRACE), "{method}");
        assert_eq!(upstream[3], "01", "{method}");
        let spans = spans_for(&received, path).await;
        assert_eq!(spans.len(), 1, "{method}: one span per request");
        let span = &spans[0];
        assert_eq!(hex(&span.trace_id), TRACE, "{method}");
        assert_eq!(hex(&span.parent_span_id), PARENT, "{method}");
        assert_eq!(
            hex(&span.span_id),
            upstream[2],
            "{method}: the member's parent"
        );
        assert_eq!(span.kind, 2, "{method}: SpanKind Server");
        assert_eq!(attribute(span, "http.request.method"), method);
        assert_eq!(attribute(span, "http.response.status_code"), "200");
        assert_eq!(attribute(span, "server.address"), "web.test");
        assert_eq!(attribute(span, "url.scheme"), "http");
        assert_eq!(attribute(span, "client.address"), "127.0.0.1");
        assert_eq!(attribute(span, "portico.pool"), "tr_web_80");
        assert_eq!(attribute(span, "portico.retries"), "0");
        assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let traced = text
        .lines()
        .filter(|l| l.contains(&format!("\"trace_id\":\"{TRACE}\"")));
    assert_eq!(traced.count(), 2, "the access log has the trace id: {text}");

    // An unsampled parent: no span, but its trace goes on to the member, unsampled.
    let unsampled = format!("00-{TRACE}-{PARENT}-00");
    let headers = [("traceparent", unsampled.as_str())];
    let reply = p
        .request(p.http, "GET", "web.test", "/unsampled", &headers, "")
        .await
        .unwrap();
    let upstream = sent_upstream(&reply);
    assert_eq!(upstream[1], TRACE);
    assert_eq!(upstream[3], "00");
    assert_ne!(upstream[2], PARENT);
    assert!(spans_for(&received, "/unsampled").await.is_empty());

    // No parent: a new trace, sampled at the default ratio (1.0).
    let reply = p.get("web.test", "/new").await;
    let upstream = sent_upstream(&reply);
    let spans = spans_for(&received, "/new").await;
    assert_eq!(spans.len(), 1);
    assert_eq!(hex(&spans[0].trace_id), upstream[1]);
    assert!(spans[0].parent_span_id.is_empty());
}

#[tokio::test]
async fn without_an_endpoint_headers_pass_untouched_and_nothing_is_exported() {
    let (collector, received) = collector().await;
    let m = web().await;
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("web.test", "/ready", 200, "web").await;
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    for (method, body) in [("GET", ""), ("POST", "12345")] {
        let headers = [("traceparent", traceparent.as_str())];
        let reply = p
            .request(p.http, method, "web.test", "/off", &headers, body)
            .await
            .unwrap();
        assert_eq!(reply.json()["headers"]["traceparent"], traceparent.as_str());
        let reply = p.get("web.test", "/none").await;
        assert!(reply.json()["headers"]["traceparent"].is_null(), "{method}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = collector;
    assert_eq!(received.lock().unwrap().posts, 0);
}

#[tokio::test]
async fn a_down_collector_slows_no_request() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let m = web().await;
    let flag = format!("--otlp-endpoint=http://{addr}/v1/traces");
    let p = Portico::start(m.path(), &[&flag]).await;
    p.wait_route("web.test", "/ready", 200, "web").await;
    let started = Instant::now();
    for _ in 0..200 {
        assert_eq!(p.get("web.test", "/down").await.status, 200);
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
