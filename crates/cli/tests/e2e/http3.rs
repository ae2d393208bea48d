//! HTTP/3 beside the HTTPS listener (built-in proxy): a real QUIC and HTTP/3 client
//! (`portico_testkit::H3Client`) gets the same routes, certificates by SNI and access log
//! lines as HTTPS, request bodies included; HTTPS responses over HTTP/1.1 (the own path) and
//! HTTP/2 (hyper's) advertise it with `Alt-Svc`, plain HTTP ones do not; `--http3 off` serves
//! none and advertises none.

use crate::support::*;
use crate::tls_support::*;
use http::Request;
use portico_testkit::H3Client;
use portico_tls::generate::Authority;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::Value;
use std::time::Duration;

const NS: &str = "h3";

/// `a.test` and `b.test` with their own certificates, each to its own service, and
/// `plain.test` without TLS; the access log in the manifests' directory.
async fn manifests() -> (Manifests, Vec<u8>, Vec<u8>) {
    let m = Manifests::new();
    for name in ["web-a", "web-b"] {
        let pods = echo_pods(name, 1).await;
        m.write(&format!("{name}.yaml"), &service(NS, name, &ready(&pods)));
    }
    let ca = Authority::new("h3").unwrap();
    let mut subjects = vec![];
    for (host, web) in [("a.test", "web-a"), ("b.test", "web-b")] {
        let cert = ca.issue(&[host]).unwrap();
        let secret = format!("{web}-tls");
        m.write(
            &format!("{secret}.json"),
            &issued_secret(NS, &secret, &cert),
        );
        let rules = [(host, "/", "Prefix", web, "80")];
        let y = ingress(NS, web, "2026-01-01T00:00:00Z", &rules);
        let tls = format!("spec:\n  tls:\n  - hosts: [{host}]\n    secretName: {secret}\n");
        m.write(
            &format!("{web}-ingress.yaml"),
            &y.replacen("spec:\n", &tls, 1),
        );
        subjects.push(der(&cert.leaf_pem));
    }
    let plain = [("plain.test", "/", "Prefix", "web-a", "80")];
    let y = ingress(NS, "plain", "2026-01-01T00:00:00Z", &plain);
    m.write("plain.yaml", &y);
    let b = subjects.pop().unwrap();
    (m, subjects.pop().unwrap(), b)
}

/// The leaf certificate the server presented on `client`'s connection (DER).
fn served_certificate(client: &H3Client) -> Vec<u8> {
    let identity = client.connection().peer_identity().expect("a TLS session");
    let chain = identity
        .downcast::<Vec<CertificateDer<'static>>>()
        .expect("rustls certificates");
    chain.first().expect("a leaf").to_vec()
}

/// The DER of a PEM certificate.
fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

fn alt_svc(headers: &http::HeaderMap) -> Option<String> {
    Some(headers.get("alt-svc")?.to_str().unwrap().to_owned())
}

#[tokio::test]
async fn https_listeners_serve_http3_with_the_same_routes_certificates_and_log() {
    let (m, cert_a, cert_b) = manifests().await;
    let log = m.path().join("access.log");
    let flag = format!("--access-log={}", log.display());
    let p = Portico::start(m.path(), &[&flag]).await;
    p.wait_route("plain.test", "/", 200, "web-a").await;
    let advert = Some(format!("h3=\":{}\"; ma=86400", p.https.port()));

    // HTTPS over HTTP/1.1 and HTTP/2 advertises HTTP/3 on the same port; plain HTTP does not.
    let h1 = H1::over(connect(p.https, Some("a.test"), &[]).await)
        .await
        .get("a.test", "/")
        .await;
    assert_eq!((h1.status, alt_svc(&h1.headers)), (200, advert.clone()));
    let conn = connect(p.https, Some("a.test"), &[b"h2"]).await;
    let req = Request::get("https://a.test/")
        .body(Default::default())
        .unwrap();
    let h2 = H2::over(conn).await.send(req).await;
    assert_eq!((h2.status, alt_svc(&h2.headers)), (200, advert.clone()));
    let plain = p.get("plain.test", "/").await;
    assert_eq!((plain.status, alt_svc(&plain.headers)), (200, None));

    // HTTP/3: each host its certificate by SNI and its route's backend.
    for (host, cert, service) in [("a.test", &cert_a, "web-a"), ("b.test", &cert_b, "web-b")] {
        let mut client = H3Client::connect(p.https, host).await.unwrap();
        assert_eq!(
            &served_certificate(&client),
            cert,
            "{host}: its certificate"
        );
        let answer = client.get(host, "/over-h3?x=1").await.unwrap();
        assert_eq!(answer.status, 200, "{host}: {answer:?}");
        let echo: Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(echo["service"], service, "{echo}");
        assert_eq!(echo["path"], "/over-h3", "{echo}");
        assert_eq!(echo["host"], host, "{echo}");
        assert_eq!(echo["headers"]["x-forwarded-proto"], "https", "{echo}");
        assert_eq!(alt_svc(&answer.headers), advert, "{host}");
        // Several requests on one connection, a body among them.
        let post = Request::post(format!("https://{host}/upload"))
            .body(())
            .unwrap();
        let answer = client.send(post, &[7u8; 100_000]).await.unwrap();
        assert_eq!(answer.status, 200, "{host}: {answer:?}");
        let echo: Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(echo["method"], "POST", "{echo}");
        assert_eq!(echo["body_bytes"], 100_000, "{echo}");
    }
    // A request head above --max-header-bytes (16 KiB) is refused as over HTTP/1.1 and
    // HTTP/2: the limit is in the server's SETTINGS (the client may refuse to send it) and
    // enforced (431).
    let mut client = H3Client::connect(p.https, "a.test").await.unwrap();
    let big = Request::get("https://a.test/big")
        .header("x-big", "x".repeat(20_000))
        .body(())
        .unwrap();
    let refused = client.send(big, b"").await;
    assert!(
        refused.as_ref().map_or(true, |a| a.status == 431),
        "an oversized head: {refused:?}"
    );
    // No route: Portico's own answer, over HTTP/3 too.
    let mut client = H3Client::connect(p.https, "nowhere.test").await.unwrap();
    let answer = client.get("nowhere.test", "/").await.unwrap();
    assert_eq!(answer.status, 404);

    // The access log has the HTTP/3 requests like any other.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let line = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let mut found = text.lines().filter(|l| l.contains("/over-h3"));
        if let Some(line) = found.find(|l| l.contains("\"b.test\"")) {
            break serde_json::from_str::<Value>(line).unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no line for /over-h3: {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(line["status"], 200, "{line}");
    assert_eq!(line["host"], "b.test", "{line}");
    assert_eq!(line["client"], "127.0.0.1", "{line}");
}

#[tokio::test]
async fn with_http3_off_nothing_listens_on_udp_and_nothing_is_advertised() {
    let (m, _, _) = manifests().await;
    let p = Portico::start(m.path(), &["--http3=off"]).await;
    p.wait_route("plain.test", "/", 200, "web-a").await;
    let h1 = H1::over(connect(p.https, Some("a.test"), &[]).await)
        .await
        .get("a.test", "/")
        .await;
    assert_eq!((h1.status, alt_svc(&h1.headers)), (200, None));
    let tried =
        tokio::time::timeout(Duration::from_secs(3), H3Client::connect(p.https, "a.test")).await;
    assert!(
        !matches!(tried, Ok(Ok(_))),
        "an HTTP/3 connection with --http3=off"
    );
}

/// The IngressClass `portico` with `portico.dev/http3` set to `value`.
fn class(value: &str) -> String {
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: portico\n  annotations:\n    portico.dev/http3: \"{value}\"\nspec:\n  controller: portico.dev/ingress-controller\n"
    )
}

/// The `Alt-Svc` of an HTTPS answer for `a.test` over HTTP/1.1.
async fn advertised(p: &Portico) -> Option<String> {
    let h1 = H1::over(connect(p.https, Some("a.test"), &[]).await)
        .await
        .get("a.test", "/")
        .await;
    assert_eq!(h1.status, 200);
    alt_svc(&h1.headers)
}

#[tokio::test]
async fn an_ingress_class_turns_http3_off_for_its_load_balancers_without_a_restart() {
    let (m, _, _) = manifests().await;
    m.write("class.yaml", &class("false"));
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("plain.test", "/", 200, "web-a").await;
    assert_eq!(
        advertised(&p).await,
        None,
        "no Alt-Svc with the class's http3 off"
    );
    let tried = tokio::time::timeout(Duration::from_secs(3), async {
        let mut client = H3Client::connect(p.https, "a.test").await?;
        client.get("a.test", "/").await
    })
    .await;
    assert!(
        !matches!(tried, Ok(Ok(_))),
        "an HTTP/3 answer with the class's http3 off: {tried:?}"
    );

    // Turned on again in the class: advertised and served, no restart.
    m.write("class.yaml", &class("true"));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while advertised(&p).await.is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "never advertised again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut client = H3Client::connect(p.https, "a.test").await.unwrap();
    assert_eq!(client.get("a.test", "/").await.unwrap().status, 200);

    // Another value is a warning on the class; HTTP/3 stays on.
    m.write("class.yaml", &class("no"));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let text = p.admin_json("/api/v1/diagnostics").await.to_string();
        if text.contains("portico.dev/http3") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no warning: {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(advertised(&p).await.is_some());
}
