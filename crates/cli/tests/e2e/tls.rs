//! TLS termination end to end: the real binary, Secrets in manifest files, rustls clients.

use crate::tls_support::*;
use crate::{backends, support::*};
use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use portico_tls::generate::Authority;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

const RSA_PKCS1_KEY: &str = include_str!("../../../tls/testdata/rsa-pkcs1.key");
const RSA_PKCS1_CRT: &str = include_str!("../../../tls/testdata/rsa-pkcs1.crt");
const EC_SEC1_KEY: &str = include_str!("../../../tls/testdata/ec-sec1.key");

/// Adds `spec.tls` entries (hosts, secretName) to an Ingress made by [`ingress`].
fn with_tls(ingress: &str, entries: &[(&[&str], &str)]) -> String {
    let mut tls = String::from("spec:\n  tls:\n");
    for (hosts, secret) in entries {
        tls.push_str("  - secretName: ");
        tls.push_str(secret);
        tls.push('\n');
        if !hosts.is_empty() {
            let _ = writeln!(tls, "    hosts: [{}]", hosts.join(", "));
        }
    }
    ingress.replacen("spec:\n", &tls, 1)
}

fn with_annotation(ingress: &str, key: &str, value: &str) -> String {
    let annotation = format!("metadata:\n  annotations:\n    {key}: \"{value}\"\n");
    ingress.replacen("metadata:\n", &annotation, 1)
}

/// An Ingress in `ns` sending `/` of each host to `svc`.
fn hosts_ingress(ns: &str, name: &str, hosts: &[&str], svc: &str) -> String {
    let rules: Vec<_> = hosts
        .iter()
        .map(|h| (*h, "/", "Prefix", svc, "80"))
        .collect();
    ingress(ns, name, "2026-01-01T00:00:00Z", &rules)
}

/// The Ingress diagnostics the admin API reports, as (field, message).
async fn diagnostics(p: &Portico, ns: &str, name: &str) -> Vec<(String, String)> {
    let ingress = p.ingress(ns, name).await;
    let found = ingress["diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let field = |d: &serde_json::Value, k: &str| d[k].as_str().unwrap_or("").to_owned();
    found
        .iter()
        .map(|d| (field(d, "field"), field(d, "message")))
        .collect()
}

#[tokio::test]
async fn sni_selects_each_host_certificate_and_a_wildcard_covers_one_label() {
    let m = backends("tls-sni", &[("web", 1)]).await;
    let ca = Authority::new("e2e ca").unwrap();
    let (a, b, wild) = (
        ca.issue(&["a.shop.test"]).unwrap(),
        ca.issue(&["b.shop.test"]).unwrap(),
        ca.issue(&["*.wild.test"]).unwrap(),
    );
    m.write("a.json", &issued_secret("tls-sni", "a-tls", &a));
    m.write("b.json", &issued_secret("tls-sni", "b-tls", &b));
    m.write("wild.json", &issued_secret("tls-sni", "wild-tls", &wild));
    let hosts = ["a.shop.test", "b.shop.test", "x.wild.test", "*.wild.test"];
    let ing = hosts_ingress("tls-sni", "shop", &hosts, "web");
    let tls: &[(&[&str], &str)] = &[
        (&["a.shop.test"], "a-tls"),
        (&["b.shop.test"], "b-tls"),
        (&["\"*.wild.test\""], "wild-tls"),
    ];
    m.write("ing.yaml", &with_tls(&ing, tls));
    let p = Portico::start(m.path(), &[]).await;
    for (sni, issued) in [
        ("a.shop.test", &a),
        ("b.shop.test", &b),
        ("x.wild.test", &wild),
        ("y.wild.test", &wild),
    ] {
        // Verified against the authority, for the name sent: the chain is served whole.
        let conn = try_connect(p.https, Some(sni), &[], Trust::Authority(&ca)).await;
        let conn = conn.unwrap_or_else(|e| panic!("{sni}: {e}"));
        assert_eq!(conn.leaf, leaf_of(&issued.chain_pem), "{sni}");
        let reply = H1::over(conn).await.get(sni, "/path?q=1").await;
        assert_eq!(
            (reply.status, reply.service()),
            (200, "web".to_owned()),
            "{sni}"
        );
        let echo = reply.json();
        assert_eq!(echo["headers"]["x-forwarded-proto"], "https");
        assert_eq!(echo["query"], "q=1");
    }
    // Two labels below the wildcard: not covered, the default certificate answers.
    let deep = connect(p.https, Some("a.b.wild.test"), &[]).await;
    assert_ne!(deep.leaf, leaf_of(&wild.chain_pem));
    let diagnostics = diagnostics(&p, "tls-sni", "shop").await;
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
}

#[tokio::test]
async fn unknown_or_missing_sni_gets_the_default_certificate_and_is_routed_by_host() {
    let m = backends("tls-default", &[("web", 1), ("other", 1)]).await;
    let ca = Authority::new("e2e ca").unwrap();
    let (a, fallback) = (
        ca.issue(&["a.test"]).unwrap(),
        ca.issue(&["fallback.test"]).unwrap(),
    );
    m.write("a.json", &issued_secret("tls-default", "a-tls", &a));
    m.write(
        "fallback.json",
        &issued_secret("ops", "fallback-tls", &fallback),
    );
    let mut y = hosts_ingress("tls-default", "shop", &["a.test"], "web");
    y.push_str(&hosts_ingress(
        "tls-default",
        "other",
        &["plain.test"],
        "other",
    ));
    m.write("ing.yaml", &with_tls(&y, &[(&["a.test"], "a-tls")]));
    let p = Portico::start(m.path(), &["--default-certificate", "ops/fallback-tls"]).await;
    for sni in [Some("unknown.test"), Some("plain.test"), None] {
        let conn = connect(p.https, sni, &[]).await;
        assert_eq!(conn.leaf, leaf_of(&fallback.chain_pem), "{sni:?}");
    }
    let conn = connect(p.https, None, &[]).await;
    let reply = H1::over(conn).await.get("plain.test", "/").await;
    assert_eq!((reply.status, reply.service()), (200, "other".to_owned()));

    // Without --default-certificate: a self-signed certificate made at start.
    let q = Portico::start(m.path(), &[]).await;
    let first = connect(q.https, Some("unknown.test"), &[]).await;
    let second = connect(q.https, None, &[]).await;
    assert_eq!(first.leaf, second.leaf);
    assert_ne!(first.leaf, leaf_of(&fallback.chain_pem));
    let self_signed = try_connect(q.https, Some("unknown.test"), &[], Trust::Authority(&ca));
    assert!(self_signed.await.is_err(), "not signed by the authority");
}

#[tokio::test]
async fn a_pkcs1_rsa_key_and_a_sec1_ec_key_are_served() {
    let m = backends("tls-keys", &[("web", 1)]).await;
    m.write(
        "rsa.json",
        &tls_secret("tls-keys", "rsa-tls", RSA_PKCS1_CRT, RSA_PKCS1_KEY),
    );
    let ec_crt = include_str!("../../../tls/testdata/ec-sec1.crt");
    m.write(
        "ec.json",
        &tls_secret("tls-keys", "ec-tls", ec_crt, EC_SEC1_KEY),
    );
    let ing = hosts_ingress("tls-keys", "keys", &["rsa.test", "ec.test"], "web");
    let tls: &[(&[&str], &str)] = &[(&["rsa.test"], "rsa-tls"), (&["ec.test"], "ec-tls")];
    m.write("ing.yaml", &with_tls(&ing, tls));
    let p = Portico::start(m.path(), &[]).await;
    let rsa = connect(p.https, Some("rsa.test"), &[]).await;
    assert_eq!(rsa.leaf, leaf_of(RSA_PKCS1_CRT));
    assert_eq!(H1::over(rsa).await.get("rsa.test", "/").await.status, 200);
    assert_eq!(
        connect(p.https, Some("ec.test"), &[]).await.leaf,
        leaf_of(ec_crt)
    );
    assert!(diagnostics(&p, "tls-keys", "keys").await.is_empty());
}

#[tokio::test]
async fn a_mismatched_key_is_reported_and_its_host_falls_back_to_the_default_certificate() {
    let m = backends("tls-bad", &[("web", 1)]).await;
    let ca = Authority::new("e2e ca").unwrap();
    let (good, other) = (
        ca.issue(&["good.test"]).unwrap(),
        ca.issue(&["bad.test"]).unwrap(),
    );
    let bad = ca.issue(&["bad.test"]).unwrap();
    m.write("good.json", &issued_secret("tls-bad", "good-tls", &good));
    m.write(
        "bad.json",
        &tls_secret("tls-bad", "bad-tls", &bad.chain_pem, &other.key_pem),
    );
    let ing = hosts_ingress("tls-bad", "shop", &["good.test", "bad.test"], "web");
    let tls: &[(&[&str], &str)] = &[(&["good.test"], "good-tls"), (&["bad.test"], "bad-tls")];
    m.write("ing.yaml", &with_tls(&ing, tls));
    let p = Portico::start(m.path(), &[]).await;
    let found = diagnostics(&p, "tls-bad", "shop").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "spec.tls[1].secretName");
    assert!(
        found[0].1.contains("secret \"tls-bad/bad-tls\""),
        "{found:?}"
    );
    assert!(
        found[0].1.contains("does not match the certificate"),
        "{found:?}"
    );
    let ingress = p.ingress("tls-bad", "shop").await;
    assert_eq!(ingress["diagnostics"][0]["severity"], "warning");

    let fallback = connect(p.https, Some("bad.test"), &[]).await;
    assert_ne!(fallback.leaf, leaf_of(&bad.chain_pem));
    assert_eq!(fallback.leaf, connect(p.https, None, &[]).await.leaf);
    let reply = H1::over(fallback).await.get("bad.test", "/").await;
    assert_eq!(
        (reply.status, reply.service()),
        (200, "web".to_owned()),
        "still served"
    );
    let good_conn = connect(p.https, Some("good.test"), &[]).await;
    assert_eq!(
        good_conn.leaf,
        leaf_of(&good.chain_pem),
        "the other host is unaffected"
    );
}

#[tokio::test]
async fn a_rotated_secret_reaches_new_handshakes_while_an_open_connection_continues() {
    let m = backends("tls-rotate", &[("web", 1)]).await;
    let ca = Authority::new("e2e ca").unwrap();
    let (old, new) = (
        ca.issue(&["a.test"]).unwrap(),
        ca.issue(&["a.test"]).unwrap(),
    );
    m.write("secret.json", &issued_secret("tls-rotate", "a-tls", &old));
    let ing = hosts_ingress("tls-rotate", "shop", &["a.test"], "web");
    m.write("ing.yaml", &with_tls(&ing, &[(&["a.test"], "a-tls")]));
    let p = Portico::start(m.path(), &[]).await;
    let open = connect(p.https, Some("a.test"), &[]).await;
    assert_eq!(open.leaf, leaf_of(&old.chain_pem));
    let mut kept = H1::over(open).await;
    assert_eq!(kept.get("a.test", "/before").await.status, 200);

    m.write("secret.json", &issued_secret("tls-rotate", "a-tls", &new));
    let start = Instant::now();
    loop {
        let conn = connect(p.https, Some("a.test"), &[]).await;
        if conn.leaf == leaf_of(&new.chain_pem) {
            break;
        }
        assert_eq!(conn.leaf, leaf_of(&old.chain_pem));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "rotation not served"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let after = kept.get("a.test", "/after").await;
    assert_eq!(
        (after.status, after.json()["path"].clone()),
        (200, "/after".into())
    );
}

/// Every TLS Ingress and its Secret deleted: the default listeners' certificates go with them
/// (they were kept, served and held in memory until the next TLS Ingress).
#[tokio::test]
async fn a_deleted_secret_is_no_longer_served_once_no_ingress_is_left() {
    let m = backends("tls-gone", &[("web", 1)]).await;
    let ca = Authority::new("e2e ca").unwrap();
    let issued = ca.issue(&["a.test"]).unwrap();
    m.write("secret.json", &issued_secret("tls-gone", "a-tls", &issued));
    let ing = hosts_ingress("tls-gone", "shop", &["a.test"], "web");
    m.write("ing.yaml", &with_tls(&ing, &[(&["a.test"], "a-tls")]));
    let p = Portico::start(m.path(), &[]).await;
    let conn = connect(p.https, Some("a.test"), &[]).await;
    assert_eq!(conn.leaf, leaf_of(&issued.chain_pem));

    m.remove("ing.yaml");
    m.remove("secret.json");
    let start = Instant::now();
    loop {
        match try_connect(p.https, Some("a.test"), &[], Trust::Any).await {
            Ok(conn) if conn.leaf == leaf_of(&issued.chain_pem) => {}
            // Another certificate (the built-in default), or none at all.
            _ => break,
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the deleted Secret's certificate is still served"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn alpn_negotiates_h2_and_http_1_1() {
    let m = backends("tls-alpn", &[("web", 1)]).await;
    m.write(
        "ing.yaml",
        &hosts_ingress("tls-alpn", "shop", &["a.test"], "web"),
    );
    let p = Portico::start(m.path(), &[]).await;
    let h2 = connect(p.https, Some("a.test"), &[b"h2", b"http/1.1"]).await;
    assert_eq!(h2.alpn.as_deref(), Some(&b"h2"[..]));
    let req = Request::get("https://a.test/h2")
        .body(Full::default())
        .unwrap();
    let reply = H2::over(h2).await.send(req).await;
    assert_eq!((reply.status, reply.version), (200, http::Version::HTTP_2));
    assert_eq!(reply.json()["host"], "a.test");
    assert_eq!(reply.json()["headers"]["x-forwarded-proto"], "https");
    let h1 = connect(p.https, Some("a.test"), &[b"http/1.1"]).await;
    assert_eq!(h1.alpn.as_deref(), Some(&b"http/1.1"[..]));
}

#[tokio::test]
async fn a_grpc_style_call_reaches_an_h2c_upstream_and_its_trailers_come_back() {
    let m = Manifests::new();
    let addr = grpc_backend("greeter").await;
    let service = service_on_port("tls-grpc", "greeter", 50051, &ready(&[addr]))
        .replace(
            "  - name: http\n",
            "  - name: grpc\n    appProtocol: kubernetes.io/h2c\n",
        )
        .replace("- name: http\n  port:", "- name: grpc\n  port:");
    m.write("backends.yaml", &service);
    let ing = ingress(
        "tls-grpc",
        "grpc",
        "2026-01-01T00:00:00Z",
        &[("grpc.test", "/", "Prefix", "greeter", "grpc")],
    );
    m.write("ing.yaml", &ing);
    let p = Portico::start(m.path(), &[]).await;
    let lb = &p.admin_json("/api/v1/loadbalancers").await[0];
    assert_eq!(lb["pools"][0]["protocol"], "H2C", "{lb}");
    let conn = connect(p.https, Some("grpc.test"), &[b"h2"]).await;
    let mut client = H2::over(conn).await;
    for _ in 0..3 {
        let req = Request::post("https://grpc.test/helloworld.Greeter/SayHello")
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Full::new(Bytes::from_static(b"\0\0\0\0\x02\x0a\x00")))
            .unwrap();
        let reply = client.send(req).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.headers["content-type"], "application/grpc");
        let trailers = reply.trailers.clone().expect("trailers reach the client");
        assert_eq!(trailers["grpc-status"], "0");
        let echo = reply.json();
        assert_eq!(echo["service"], "greeter");
        assert_eq!(echo["proto"], "HTTP/2.0", "the upstream hop is HTTP/2");
        assert_eq!(echo["method"], "POST");
        assert_eq!(echo["path"], "/helloworld.Greeter/SayHello");
        assert_eq!(echo["te"], "trailers");
        assert_eq!(echo["x-forwarded-proto"], "https");
    }
}

#[tokio::test]
async fn http_redirects_tls_hosts_with_308_unless_the_ingress_opts_out() {
    let m = backends("tls-redirect", &[("web", 1), ("legacy", 1)]).await;
    let ca = Authority::new("e2e ca").unwrap();
    m.write(
        "a.json",
        &issued_secret(
            "tls-redirect",
            "tls",
            &ca.issue(&["a.test", "old.test"]).unwrap(),
        ),
    );
    let on = with_tls(
        &hosts_ingress("tls-redirect", "redirected", &["a.test"], "web"),
        &[(&[], "tls")],
    );
    let off = with_tls(
        &hosts_ingress("tls-redirect", "kept", &["old.test"], "legacy"),
        &[(&["old.test"], "tls")],
    );
    let bad = hosts_ingress("tls-redirect", "bad", &["bad.test"], "web");
    let mut y = on;
    y.push_str(&with_annotation(&off, "portico.dev/ssl-redirect", "false"));
    y.push_str(&with_annotation(&bad, "portico.dev/ssl-redirect", "maybe"));
    m.write("ing.yaml", &y);
    let p = Portico::start(m.path(), &[]).await;
    let r = p.get("a.test", "/x/y?z=1").await;
    assert_eq!(r.status, 308);
    let location = format!("https://a.test:{}/x/y?z=1", p.https.port());
    assert_eq!(r.headers["location"], location.as_str());
    let opted_out = p.get("old.test", "/x").await;
    assert_eq!(
        (opted_out.status, opted_out.service()),
        (200, "legacy".to_owned())
    );
    assert_eq!(opted_out.json()["headers"]["x-forwarded-proto"], "http");
    let over_tls = H1::over(connect(p.https, Some("a.test"), &[]).await).await;
    let mut over_tls = over_tls;
    let r = over_tls.get("a.test", "/x/y?z=1").await;
    assert_eq!((r.status, r.service()), (200, "web".to_owned()));
    let found = diagnostics(&p, "tls-redirect", "bad").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "metadata.annotations[portico.dev/ssl-redirect]");
}

#[tokio::test]
async fn private_keys_reach_neither_the_admin_api_nor_the_logs() {
    let m = backends("tls-secret", &[("web", 1)]).await;
    let ca = Authority::new("e2e ca").unwrap();
    let (good, other) = (
        ca.issue(&["a.test"]).unwrap(),
        ca.issue(&["b.test"]).unwrap(),
    );
    m.write("good.json", &issued_secret("tls-secret", "good", &good));
    m.write(
        "bad.json",
        &tls_secret("tls-secret", "bad", &good.chain_pem, &other.key_pem),
    );
    let broken = other.key_pem.replacen("MI", "M!", 1);
    m.write(
        "broken.json",
        &tls_secret("tls-secret", "broken", &other.chain_pem, &broken),
    );
    let ing = hosts_ingress("tls-secret", "shop", &["a.test", "b.test", "c.test"], "web");
    let tls: &[(&[&str], &str)] = &[
        (&["a.test"], "good"),
        (&["b.test"], "bad"),
        (&["c.test"], "broken"),
    ];
    m.write("ing.yaml", &with_tls(&ing, tls));
    let log = m.file("portico.log");
    let p = Portico::start_logging(m.path(), "debug", &log).await;
    let mut shown = String::new();
    for path in [
        "/api/v1/loadbalancers",
        "/api/v1/ingresses",
        "/api/v1/diagnostics",
    ] {
        shown.push_str(&p.admin_json(path).await.to_string());
    }
    assert_eq!(
        diagnostics(&p, "tls-secret", "shop").await.len(),
        2,
        "{shown}"
    );
    drop(p);
    shown.push_str(&std::fs::read_to_string(&log).unwrap());
    assert!(
        shown.contains("tls-secret/bad"),
        "the log and API name the Secret"
    );
    for key in [&good.key_pem, &other.key_pem, &broken] {
        for line in key.lines().filter(|l| !l.starts_with("-----")) {
            assert!(!shown.contains(line), "key material shown: {line}");
        }
    }
    assert!(!shown.contains("PRIVATE KEY"), "a key block is shown");
}
