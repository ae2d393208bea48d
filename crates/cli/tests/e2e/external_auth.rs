//! ingress-nginx's external auth (`auth-url`) on the real binary with the built-in proxy,
//! against a real auth service on 127.0.0.1: what the subrequest carries, a 2xx letting the
//! request through with `auth-response-headers`, 401 and 403 returned, the `auth-signin`
//! redirect, and an auth service that is slow, unreachable or failing answering 500, never
//! letting the request through (ingress-nginx's `test/e2e/annotations/auth.go` cases).

use crate::support::*;
use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CREATED: &str = "2026-01-01T00:00:00Z";

/// The subrequests the auth service received: method, path and header fields.
type Seen = Arc<Mutex<Vec<(String, String, HeaderMap)>>>;

/// An auth service deciding by `Authorization`: `Bearer good` 200 with `X-User: alice`,
/// `Bearer forbidden` 403, `Bearer slow` after 3 s, `Bearer broken` 502, none 401.
async fn auth_service() -> (SocketAddr, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let record = record.clone();
                    async move { Ok::<_, Infallible>(decide(req, &record).await) }
                });
                let io = TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    (addr, seen)
}

async fn decide(req: Request<Incoming>, record: &Seen) -> Response<Full<Bytes>> {
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    record
        .lock()
        .unwrap()
        .push((method, path, req.headers().clone()));
    let token = req
        .headers()
        .get("authorization")
        .map(|v| v.as_bytes().to_vec());
    let mut response = Response::new(Full::new(Bytes::new()));
    let status = match token.as_deref() {
        Some(b"Bearer good") => {
            let user = "alice".parse().unwrap();
            response.headers_mut().insert("x-user", user);
            200
        }
        Some(b"Bearer forbidden") => 403,
        Some(b"Bearer slow") => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            200
        }
        Some(b"Bearer broken") => 502,
        _ => {
            let challenge = "Bearer realm=\"test\"".parse().unwrap();
            response.headers_mut().insert("www-authenticate", challenge);
            401
        }
    };
    *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
    response
}

fn guarded(name: &str, host: &str, keys: &[(&str, String)]) -> String {
    let keys: Vec<(&str, &str)> = keys.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let rules = [(host, "/", "Prefix", "web", "80")];
    nginx_annotated(&ingress("auth", name, CREATED, &rules), &keys)
}

async fn manifests(auth: SocketAddr) -> Manifests {
    let m = Manifests::new();
    let web = echo_pods("web", 1).await;
    m.write("web.yaml", &service("auth", "web", &ready(&web)));
    let url = format!("http://{auth}/check");
    let keys = [
        ("auth-url", url.clone()),
        ("auth-response-headers", "X-User".to_owned()),
        ("proxy-read-timeout", "1".to_owned()),
    ];
    m.write("ok.yaml", &guarded("ok", "auth.test", &keys));
    let keys = [
        ("auth-url", url.clone()),
        ("auth-method", "POST".to_owned()),
        ("auth-signin", "https://login.test/oauth2/start".to_owned()),
    ];
    m.write("signin.yaml", &guarded("signin", "signin.test", &keys));
    // Nothing listens on port 1; an https:// URL is not served.
    let down = [("auth-url", "http://127.0.0.1:1/check".to_owned())];
    m.write("down.yaml", &guarded("down", "down.test", &down));
    let bad = [("auth-url", "https://auth.example/check".to_owned())];
    m.write("bad.yaml", &guarded("bad", "bad.test", &bad));
    m.write("plain.yaml", &guarded("plain", "plain.test", &[]));
    m
}

async fn get(p: &Portico, host: &str, path: &str, token: Option<&str>) -> Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    p.request(p.http, "GET", host, path, &headers, "")
        .await
        .unwrap()
}

#[tokio::test]
async fn auth_url_lets_2xx_through_returns_401_and_403_and_fails_closed() {
    let (auth, seen) = auth_service().await;
    let m = manifests(auth).await;
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("plain.test", "/", 200, "web").await;

    // 2xx: forwarded, with the auth service's X-User replacing the client's.
    let headers = [("authorization", "Bearer good"), ("x-user", "mallory")];
    let ok = p
        .request(p.http, "GET", "auth.test", "/app?q=1", &headers, "")
        .await
        .unwrap();
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json()["headers"]["x-user"], "alice");
    let (method, path, sub) = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!((method.as_str(), path.as_str()), ("GET", "/check"));
    let field = |name: &str| sub.get(name).map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(
        field("x-original-url").as_deref(),
        Some("http://auth.test/app?q=1")
    );
    assert_eq!(field("x-original-method").as_deref(), Some("GET"));
    assert_eq!(field("x-forwarded-for").as_deref(), Some("127.0.0.1"));
    assert_eq!(field("x-forwarded-host").as_deref(), Some("auth.test"));
    assert_eq!(field("authorization").as_deref(), Some("Bearer good"));

    // 401 with the service's challenge, 403; neither reaches the backend.
    let denied = get(&p, "auth.test", "/", None).await;
    assert_eq!(denied.status, 401);
    assert_eq!(denied.headers["www-authenticate"], "Bearer realm=\"test\"");
    assert_eq!(denied.service(), "");
    assert_eq!(
        get(&p, "auth.test", "/", Some("forbidden")).await.status,
        403
    );

    // Anything else fails closed: a 502 from the service, a slow one, an unreachable one, an
    // auth-url that cannot be served.
    assert_eq!(get(&p, "auth.test", "/", Some("broken")).await.status, 500);
    let started = std::time::Instant::now();
    assert_eq!(get(&p, "auth.test", "/", Some("slow")).await.status, 500);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(get(&p, "down.test", "/", Some("good")).await.status, 500);
    assert_eq!(get(&p, "bad.test", "/", Some("good")).await.status, 503);
}

#[tokio::test]
async fn auth_signin_redirects_a_401_with_the_original_url() {
    let (auth, seen) = auth_service().await;
    let m = manifests(auth).await;
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("plain.test", "/", 200, "web").await;
    let reply = get(&p, "signin.test", "/private?x=1", None).await;
    assert_eq!(reply.status, 302);
    assert_eq!(
        reply.headers["location"],
        "https://login.test/oauth2/start?rd=http%3A%2F%2Fsignin.test%2Fprivate%3Fx%3D1"
    );
    // auth-method: the subrequest is a POST whatever the client's method.
    assert_eq!(seen.lock().unwrap().last().unwrap().0, "POST");
    assert_eq!(get(&p, "signin.test", "/", Some("good")).await.status, 200);
}
