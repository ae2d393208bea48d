//! TLS passthrough end to end: on the one HTTPS port, a passthrough host's handshake is
//! answered by its backend (with the backend's certificate), the other hosts by Portico.

use crate::tls_support::*;
use crate::upstreams::tls_backend_with;
use crate::{backends, support::*};
use portico_tls::generate::Authority;

/// `ing` (from [`ingress`]) with one annotation.
fn annotated(ing: &str, key: &str, value: &str) -> String {
    let annotation = format!("metadata:\n  annotations:\n    {key}: \"{value}\"\n");
    ing.replacen("metadata:\n", &annotation, 1)
}

/// What [`pass_beside_terminated`] made: the manifests, the authority, the passthrough
/// backend's certificate and the terminated host's.
struct Passing {
    m: Manifests,
    ca: Authority,
    own: portico_tls::generate::Issued,
    terminated: portico_tls::generate::Issued,
}

/// Manifests in `ns`: a terminated host `term.test` (its Secret issued by the returned
/// authority, to the echo `web`) and an `ssl-passthrough` Ingress for `host` to the TLS
/// backend `secure`, whose own certificate (by the same authority) names `names`.
async fn pass_beside_terminated(ns: &str, names: &[&str], host: &str) -> Passing {
    let m = backends(ns, &[("web", 1)]).await;
    let ca = Authority::new("e2e ca").unwrap();
    let (own, terminated) = (ca.issue(names).unwrap(), ca.issue(&["term.test"]).unwrap());
    let secure = tls_backend_with(&own, "secure", false).await;
    m.write("secure.yaml", &service(ns, "secure", &ready(&[secure])));
    m.write("term.json", &issued_secret(ns, "term-tls", &terminated));
    let term = ingress(
        ns,
        "term",
        "2026-01-01T00:00:00Z",
        &[("term.test", "/", "Prefix", "web", "80")],
    );
    let term = term.replacen(
        "spec:\n",
        "spec:\n  tls:\n  - secretName: term-tls\n    hosts: [term.test]\n",
        1,
    );
    m.write("term.yaml", &term);
    let pass = ingress(
        ns,
        "pass",
        "2026-01-01T00:00:00Z",
        &[(host, "/", "Prefix", "secure", "80")],
    );
    let pass = annotated(&pass, "nginx.ingress.kubernetes.io/ssl-passthrough", "true");
    m.write("pass.yaml", &pass);
    Passing {
        m,
        ca,
        own,
        terminated,
    }
}

#[tokio::test]
async fn ssl_passthrough_host_gets_the_backend_certificate_beside_terminated_hosts() {
    let ns = "tls-pass";
    let Passing {
        m,
        ca,
        own,
        terminated,
    } = pass_beside_terminated(ns, &["pass.test"], "pass.test").await;
    let p = Portico::start(m.path(), &[]).await;

    // The backend's own certificate, verified for the name; the backend saw the SNI itself.
    let conn = try_connect(p.https, Some("pass.test"), &[], Trust::Authority(&ca)).await;
    let conn = conn.expect("passthrough handshake with the backend");
    assert_eq!(conn.leaf, leaf_of(&own.chain_pem));
    let reply = H1::over(conn).await.get("pass.test", "/").await;
    assert_eq!((reply.status, reply.service()), (200, "secure".to_owned()));
    assert_eq!(reply.json()["sni"], "pass.test");

    // Another host on the same port: terminated by Portico, forwarded in plain HTTP.
    let conn = try_connect(p.https, Some("term.test"), &[], Trust::Authority(&ca)).await;
    let conn = conn.expect("terminated handshake");
    assert_eq!(conn.leaf, leaf_of(&terminated.chain_pem));
    let reply = H1::over(conn).await.get("term.test", "/").await;
    assert_eq!((reply.status, reply.service()), (200, "web".to_owned()));
    assert_eq!(reply.json()["headers"]["x-forwarded-proto"], "https");

    // An unknown name and no name: the default (self-signed) certificate, neither of those.
    for sni in [Some("unknown.test"), None] {
        let conn = connect(p.https, sni, &[]).await;
        assert_ne!(conn.leaf, leaf_of(&own.chain_pem), "{sni:?}");
        assert_ne!(conn.leaf, leaf_of(&terminated.chain_pem), "{sni:?}");
    }
}

#[tokio::test]
async fn passthrough_connections_are_balanced_and_skip_a_member_that_refuses() {
    let ns = "tls-pass-lb";
    let m = backends(ns, &[("web", 1)]).await;
    let ca = Authority::new("e2e ca").unwrap();
    let own = ca.issue(&["pass.test"]).unwrap();
    let (first, second) = (
        tls_backend_with(&own, "first", false).await,
        tls_backend_with(&own, "second", false).await,
    );
    // A port nobody listens on any more: connecting is refused.
    let refused = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    m.write(
        "secure.yaml",
        &service(ns, "secure", &ready(&[first, refused, second])),
    );
    let pass = ingress(
        ns,
        "pass",
        "2026-01-01T00:00:00Z",
        &[("pass.test", "/", "Prefix", "secure", "80")],
    );
    m.write(
        "pass.yaml",
        &annotated(&pass, "portico.dev/ssl-passthrough", "true"),
    );
    let p = Portico::start(m.path(), &[]).await;
    let mut served = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..9 {
        let conn = try_connect(p.https, Some("pass.test"), &[], Trust::Authority(&ca)).await;
        let conn = conn.unwrap_or_else(|e| panic!("connection {i}: {e}"));
        let reply = H1::over(conn).await.get("pass.test", "/").await;
        *served.entry(reply.service()).or_default() += 1;
    }
    let both = served.get("first").is_some_and(|&n| n >= 3)
        && served.get("second").is_some_and(|&n| n >= 3);
    assert!(both, "{served:?}");
}

/// The haproxy provider: on its one HTTPS port, the `ssl-passthrough` host's handshake is
/// answered by the backend (its certificate, the SNI it saw), the other host by haproxy with
/// the Ingress's certificate and HTTP routing, through the internal hop that keeps the
/// client's address.
#[tokio::test]
async fn haproxy_passes_a_host_through_beside_terminated_hosts_on_one_port() {
    let ns = "tls-pass-hx";
    let Passing {
        m,
        ca,
        own,
        terminated,
    } = pass_beside_terminated(ns, &["pass.test", "a.b.pass.test"], "*.pass.test").await;
    let p = Portico::start_haproxy(m.path(), &[]).await;
    // Served: plain HTTP for the TLS host is redirected to HTTPS.
    p.wait_route("term.test", "/", 308, "").await;

    // A name under the wildcard, two labels deep: the backend's own certificate and the SNI
    // it saw itself.
    let conn = try_connect(p.https, Some("a.b.pass.test"), &[], Trust::Authority(&ca)).await;
    let conn = conn.expect("passthrough handshake with the backend");
    assert_eq!(conn.leaf, leaf_of(&own.chain_pem));
    let reply = H1::over(conn).await.get("a.b.pass.test", "/").await;
    assert_eq!((reply.status, reply.service()), (200, "secure".to_owned()));
    assert_eq!(reply.json()["sni"], "a.b.pass.test");

    // The other host on the same port: terminated by haproxy, routed by HTTP, and the client
    // address survived the hop.
    let conn = try_connect(p.https, Some("term.test"), &[], Trust::Authority(&ca)).await;
    let conn = conn.expect("terminated handshake");
    assert_eq!(conn.leaf, leaf_of(&terminated.chain_pem));
    let reply = H1::over(conn).await.get("term.test", "/").await;
    assert_eq!((reply.status, reply.service()), (200, "web".to_owned()));
    assert_eq!(reply.json()["headers"]["x-forwarded-proto"], "https");
    assert_eq!(reply.json()["headers"]["x-forwarded-for"], "127.0.0.1");

    // The wildcard's own name is not under it: terminated, not the backend's certificate.
    let conn = connect(p.https, Some("pass.test"), &[]).await;
    assert_ne!(conn.leaf, leaf_of(&own.chain_pem));
}
