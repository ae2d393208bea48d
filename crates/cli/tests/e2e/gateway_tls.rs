//! TLSRoute on the real binary with the built-in proxy: a Gateway's TLS listener of
//! `tls.mode: Passthrough` beside its HTTPS listener on one port; and one of `tls.mode:
//! Terminate` beside both, whose hosts' TLS Portico terminates with the listener's certificate
//! and whose decrypted streams it sends to plain TCP backends. A passed-through name's
//! handshake is answered by the TLS backend itself (its certificate reaches the client),
//! another name's by Portico with the listener's certificate. Cases modelled on the upstream
//! conformance suite's TLSRoute tests (a simple same-namespace route, hostname intersection,
//! an unresolved and a forbidden backendRef), in file mode and in Kubernetes mode (status
//! written through the fake API server).

use crate::gateway_api::{OURS, class, gateway, route};
use crate::gateway_l4::{SERVED, our_conditions, wait_conditions};

/// The admin API's list of TLSRoutes.
const ROUTES: &str = "/api/v1/tlsroutes";
use crate::get::get;
use crate::tls_support::*;
use crate::upstreams::tls_backend_with;
use crate::{backends, support::*};
use portico_tls::generate::Authority;
use serde_json::Value;
use std::time::{Duration, Instant};

/// A TLSRoute `ns/name` in `version`.
fn tls_route(ns: &str, version: &str, name: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/{version}\nkind: TLSRoute\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}\n"
    )
}

/// An HTTPS listener for `term.test` and a TLS passthrough listener for `*.pass.test`, both
/// on 443 (a Gateway without an address: Portico's HTTPS listener).
const LISTENERS: &str = "[{name: https, port: 443, protocol: HTTPS, hostname: term.test, tls: {certificateRefs: [{name: term-tls}]}}, {name: tls, port: 443, protocol: TLS, hostname: '*.pass.test', tls: {mode: Passthrough}}]";

#[tokio::test]
async fn a_tls_route_passes_its_host_through_beside_a_terminated_https_host_on_one_port() {
    passes_through_beside_terminated("gw-tls", false).await;
}

/// The same with the haproxy provider: its SNI frontend on the HTTPS port.
#[tokio::test]
async fn haproxy_passes_a_tls_routes_host_through_beside_a_terminated_https_host() {
    passes_through_beside_terminated("gw-tls-hx", true).await;
}

async fn passes_through_beside_terminated(ns: &str, haproxy: bool) {
    let m = backends(ns, &[("web", 1)]).await;
    let ca = Authority::new("e2e ca").unwrap();
    let (own, terminated) = (
        ca.issue(&["db.pass.test"]).unwrap(),
        ca.issue(&["term.test"]).unwrap(),
    );
    let secure = tls_backend_with(&own, "secure", false).await;
    m.write("secure.yaml", &service(ns, "secure", &ready(&[secure])));
    m.write("term.json", &issued_secret(ns, "term-tls", &terminated));
    let to = |backend: &str| format!("rules: [{{backendRefs: [{{name: {backend}, port: 80}}]}}]");
    m.write(
        "gw.yaml",
        &[
            class("portico", OURS),
            gateway(ns, "edge", "portico", LISTENERS),
            route(
                ns,
                "web",
                "{parentRefs: [{name: edge, sectionName: https}], hostnames: [term.test], rules: [{backendRefs: [{name: web, port: 80}]}]}",
            ),
            tls_route(ns, "v1alpha2", "pass", &format!("{{parentRefs: [{{name: edge, sectionName: tls}}], hostnames: [db.pass.test], {}}}", to("secure"))),
            tls_route(ns, "v1", "elsewhere", &format!("{{parentRefs: [{{name: edge}}], hostnames: [db.other.test], {}}}", to("secure"))),
            tls_route(ns, "v1alpha3", "missing", &format!("{{parentRefs: [{{name: edge}}], hostnames: [gone.pass.test], {}}}", to("nowhere"))),
            tls_route(ns, "v1", "forbidden", "{parentRefs: [{name: edge}], hostnames: [far.pass.test], rules: [{backendRefs: [{name: web, namespace: elsewhere, port: 80}]}]}"),
        ]
        .concat(),
    );
    let p = if haproxy {
        let p = Portico::start_haproxy(m.path(), &[]).await;
        wait_conditions(&p, ROUTES, "pass", &SERVED).await;
        p
    } else {
        Portico::start(m.path(), &[]).await
    };

    // The backend's own certificate, verified for the name; the backend saw the SNI itself.
    let conn = try_connect(p.https, Some("db.pass.test"), &[], Trust::Authority(&ca)).await;
    let conn = conn.expect("passthrough handshake with the backend");
    assert_eq!(conn.leaf, leaf_of(&own.chain_pem));
    let reply = H1::over(conn).await.get("db.pass.test", "/").await;
    assert_eq!((reply.status, reply.service()), (200, "secure".to_owned()));
    assert_eq!(reply.json()["sni"], "db.pass.test");

    // The HTTPS listener's host on the same port: terminated by Portico.
    let conn = try_connect(p.https, Some("term.test"), &[], Trust::Authority(&ca)).await;
    let conn = conn.expect("terminated handshake");
    assert_eq!(conn.leaf, leaf_of(&terminated.chain_pem));
    let reply = H1::over(conn).await.get("term.test", "/").await;
    assert_eq!((reply.status, reply.service()), (200, "web".to_owned()));

    // Unresolved routes pass nothing through: their names meet Portico, not a backend.
    for sni in ["gone.pass.test", "far.pass.test", "db.other.test"] {
        let conn = connect(p.https, Some(sni), &[]).await;
        assert_ne!(conn.leaf, leaf_of(&own.chain_pem), "{sni}");
    }

    wait_conditions(&p, ROUTES, "pass", &SERVED).await;
    let no_host = [
        "Accepted=False/NoMatchingListenerHostname",
        "ResolvedRefs=True/ResolvedRefs",
    ];
    wait_conditions(&p, ROUTES, "elsewhere", &no_host).await;
    let missing = [
        "Accepted=True/Accepted",
        "ResolvedRefs=False/BackendNotFound",
    ];
    wait_conditions(&p, ROUTES, "missing", &missing).await;
    let forbidden = [
        "Accepted=True/Accepted",
        "ResolvedRefs=False/RefNotPermitted",
    ];
    wait_conditions(&p, ROUTES, "forbidden", &forbidden).await;

    let gw = crate::gateway_api::object(&p, "/api/v1/gateways", ns, "edge").await;
    let listeners = gw["status"]["listeners"].as_array().cloned().unwrap();
    let tls = listeners.iter().find(|l| l["name"] == "tls").unwrap();
    assert_eq!(tls["supportedKinds"][0]["kind"], "TLSRoute");
    // pass, missing and forbidden meet `*.pass.test`; elsewhere does not.
    assert_eq!(tls["attachedRoutes"], 3);

    let table = get(&p, &["tlsroutes"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(ns) && l.contains("pass")),
        "{table}"
    );
    let list: Value = serde_json::from_str(&get(&p, &["tlsroutes", "-o", "json"])).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(4));
}

#[tokio::test]
async fn in_kubernetes_mode_a_v1alpha3_tls_route_is_served_and_gets_its_status() {
    use crate::kube_support::Cluster;
    let ns = "gw-tls-kube";
    let ca = Authority::new("e2e ca").unwrap();
    let own = ca.issue(&["db.pass.test"]).unwrap();
    let secure = tls_backend_with(&own, "secure", false).await;
    let cluster = Cluster::new().await;
    let listeners = "[{name: tls, port: 443, protocol: TLS, hostname: '*.pass.test', tls: {mode: Passthrough}}]";
    cluster.apply(
        &[
            class("portico", OURS),
            service(ns, "secure", &ready(&[secure])),
            gateway(ns, "edge", "portico", listeners),
            tls_route(ns, "v1alpha3", "pass", "{parentRefs: [{name: edge}], hostnames: [db.pass.test], rules: [{backendRefs: [{name: secure, port: 80}]}]}"),
            tls_route(ns, "v1alpha3", "gone", "{parentRefs: [{name: edge}], hostnames: [gone.pass.test], rules: [{backendRefs: [{name: missing, port: 80}]}]}"),
        ]
        .concat(),
    );
    let p = Portico::start_kube(&cluster, &[]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let conn = loop {
        let conn = try_connect(p.https, Some("db.pass.test"), &[], Trust::Authority(&ca)).await;
        match conn {
            Ok(conn) => break conn,
            Err(e) => assert!(Instant::now() < deadline, "passthrough: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(conn.leaf, leaf_of(&own.chain_pem));
    let written = |name: &str| {
        let alpha = "gateway.networking.k8s.io/v1alpha3";
        let route = cluster.api.get(alpha, "TLSRoute", Some(ns), name);
        our_conditions(&route.unwrap_or(Value::Null))
    };
    while written("pass") != SERVED {
        assert!(Instant::now() < deadline, "pass: {:?}", written("pass"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let missing = [
        "Accepted=True/Accepted",
        "ResolvedRefs=False/BackendNotFound",
    ];
    while written("gone") != missing {
        assert!(Instant::now() < deadline, "gone: {:?}", written("gone"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls until a handshake for `sni` presents `want` (`None`: any leaf but `not`).
async fn wait_leaf(p: &Portico, sni: &str, want: Option<&str>, not: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let conn = connect(p.https, Some(sni), &[]).await;
        let ok = match want {
            Some(chain) => conn.leaf == leaf_of(chain),
            None => conn.leaf != leaf_of(not),
        };
        if ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{sni}: still the old certificate"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_tls_route_added_changed_and_removed_is_served_without_a_restart() {
    let ns = "gw-tls-live";
    let m = backends(ns, &[("web", 1)]).await;
    let ca = Authority::new("e2e ca").unwrap();
    let (first, second) = (
        ca.issue(&["db.pass.test"]).unwrap(),
        ca.issue(&["db.pass.test"]).unwrap(),
    );
    let (a, b) = (
        tls_backend_with(&first, "first", false).await,
        tls_backend_with(&second, "second", false).await,
    );
    m.write("a.yaml", &service(ns, "first", &ready(&[a])));
    m.write("b.yaml", &service(ns, "second", &ready(&[b])));
    let listeners = "[{name: tls, port: 443, protocol: TLS, hostname: '*.pass.test', tls: {mode: Passthrough}}]";
    m.write(
        "gw.yaml",
        &[
            class("portico", OURS),
            gateway(ns, "edge", "portico", listeners),
        ]
        .concat(),
    );
    let p = Portico::start(m.path(), &[]).await;
    let spec = |backend: &str| {
        format!(
            "{{parentRefs: [{{name: edge}}], hostnames: [db.pass.test], rules: [{{backendRefs: [{{name: {backend}, port: 80}}]}}]}}"
        )
    };
    m.write("route.yaml", &tls_route(ns, "v1", "pass", &spec("first")));
    wait_leaf(&p, "db.pass.test", Some(&first.chain_pem), "").await;
    m.write("route.yaml", &tls_route(ns, "v1", "pass", &spec("second")));
    wait_leaf(&p, "db.pass.test", Some(&second.chain_pem), "").await;
    m.remove("route.yaml");
    wait_leaf(&p, "db.pass.test", None, &second.chain_pem).await;
}

/// A plain TCP backend: it greets each connection with `name`, echoes every line, and after
/// the client's end of stream (a half-close) says `bye name` and closes.
async fn tcp_echo(name: &'static str) -> std::net::SocketAddr {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                write.write_all(format!("{name}\n").as_bytes()).await?;
                let mut lines = BufReader::new(read).lines();
                while let Some(line) = lines.next_line().await? {
                    write.write_all(format!("{line}\n").as_bytes()).await?;
                }
                write.write_all(format!("bye {name}\n").as_bytes()).await?;
                write.shutdown().await?;
                std::io::Result::Ok(())
            });
        }
    });
    addr
}

/// Over a terminated connection to a TCP echo backend: its greeting, a line echoed, then,
/// after the client's half-close, the backend's goodbye and the end of the stream.
async fn talk(conn: TlsConn) -> Vec<String> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut stream = BufReader::new(conn.stream);
    let mut said = Vec::new();
    let mut line = String::new();
    let read = async |stream: &mut BufReader<_>, line: &mut String| {
        line.clear();
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read_line(line));
        n.await.expect("a line in time").expect("readable");
        line.trim_end().to_owned()
    };
    said.push(read(&mut stream, &mut line).await);
    stream
        .get_mut()
        .write_all(b"hello through TLS\n")
        .await
        .unwrap();
    said.push(read(&mut stream, &mut line).await);
    stream.get_mut().shutdown().await.unwrap();
    said.push(read(&mut stream, &mut line).await);
    said.push(read(&mut stream, &mut line).await);
    said
}

/// An HTTPS listener for `term.test`, a Passthrough TLS listener for `*.pass.test` and a
/// Terminate TLS listener for `*.tcp.test`, all on 443.
const THREE: &str = "[{name: https, port: 443, protocol: HTTPS, hostname: term.test, tls: {certificateRefs: [{name: term-tls}]}}, {name: tls, port: 443, protocol: TLS, hostname: '*.pass.test', tls: {mode: Passthrough}}, {name: tcp, port: 443, protocol: TLS, hostname: '*.tcp.test', tls: {mode: Terminate, certificateRefs: [{name: tcp-tls}]}}]";

#[tokio::test]
async fn a_terminate_listener_sends_each_hosts_decrypted_stream_to_its_own_backend() {
    terminates("gw-tls-term", false).await;
}

/// The same with the haproxy provider: a second hop to its terminating `mode tcp` frontend.
#[tokio::test]
async fn haproxy_sends_each_terminated_hosts_decrypted_stream_to_its_own_backend() {
    terminates("gw-tls-term-hx", true).await;
}

async fn terminates(ns: &str, haproxy: bool) {
    let m = backends(ns, &[("web", 1)]).await;
    let ca = Authority::new("e2e ca").unwrap();
    let (own, terminated, tcp) = (
        ca.issue(&["db.pass.test"]).unwrap(),
        ca.issue(&["term.test"]).unwrap(),
        ca.issue(&["*.tcp.test"]).unwrap(),
    );
    let secure = tls_backend_with(&own, "secure", false).await;
    let (alpha, beta) = (tcp_echo("alpha").await, tcp_echo("beta").await);
    m.write("secure.yaml", &service(ns, "secure", &ready(&[secure])));
    m.write("alpha.yaml", &service(ns, "alpha", &ready(&[alpha])));
    m.write("beta.yaml", &service(ns, "beta", &ready(&[beta])));
    m.write("term.json", &issued_secret(ns, "term-tls", &terminated));
    m.write("tcp.json", &issued_secret(ns, "tcp-tls", &tcp));
    let to = |host: &str, backend: &str| {
        format!(
            "{{parentRefs: [{{name: edge}}], hostnames: [{host}], rules: [{{backendRefs: [{{name: {backend}, port: 80}}]}}]}}"
        )
    };
    m.write(
        "a.yaml",
        &tls_route(ns, "v1", "a", &to("a.tcp.test", "alpha")),
    );
    m.write(
        "gw.yaml",
        &[
            class("portico", OURS),
            gateway(ns, "edge", "portico", THREE),
            route(
                ns,
                "web",
                "{parentRefs: [{name: edge, sectionName: https}], hostnames: [term.test], rules: [{backendRefs: [{name: web, port: 80}]}]}",
            ),
            tls_route(ns, "v1", "pass", &to("db.pass.test", "secure")),
            tls_route(ns, "v1alpha2", "b", &to("b.tcp.test", "beta")),
            tls_route(ns, "v1", "gone", &to("gone.tcp.test", "nowhere")),
        ]
        .concat(),
    );
    let p = if haproxy {
        Portico::start_haproxy(m.path(), &[]).await
    } else {
        Portico::start(m.path(), &[]).await
    };
    wait_conditions(&p, ROUTES, "b", &SERVED).await;

    // Each terminated host: the listener's certificate, verified for the name; no ALPN
    // (offered h2 is not taken: the stream is not HTTP); its own backend, half-close passed on.
    for (sni, backend) in [("a.tcp.test", "alpha"), ("b.tcp.test", "beta")] {
        let conn = try_connect(p.https, Some(sni), &[b"h2"], Trust::Authority(&ca)).await;
        let conn = conn.unwrap_or_else(|e| panic!("{sni}: terminated handshake: {e}"));
        assert_eq!(conn.leaf, leaf_of(&tcp.chain_pem), "{sni}");
        assert_eq!(conn.alpn, None, "{sni}");
        assert_eq!(
            talk(conn).await,
            [backend, "hello through TLS", &format!("bye {backend}"), ""],
            "{sni}"
        );
    }

    // A name the Terminate listener covers that no route serves, or whose backend is
    // missing: closed before any handshake (not served as HTTPS).
    for sni in ["c.tcp.test", "gone.tcp.test", "x.c.tcp.test"] {
        let refused = try_connect(p.https, Some(sni), &[], Trust::Any).await;
        assert!(refused.is_err(), "{sni}: a handshake");
    }
    let missing = [
        "Accepted=True/Accepted",
        "ResolvedRefs=False/BackendNotFound",
    ];
    wait_conditions(&p, ROUTES, "gone", &missing).await;

    // The passed-through host on the same port: the backend's own certificate.
    let conn = try_connect(p.https, Some("db.pass.test"), &[], Trust::Authority(&ca)).await;
    assert_eq!(conn.expect("passthrough").leaf, leaf_of(&own.chain_pem));
    // The HTTPS listener's host: terminated, HTTP routed.
    let conn = try_connect(p.https, Some("term.test"), &[], Trust::Authority(&ca)).await;
    let conn = conn.expect("terminated HTTPS handshake");
    assert_eq!(conn.leaf, leaf_of(&terminated.chain_pem));
    let reply = H1::over(conn).await.get("term.test", "/").await;
    assert_eq!((reply.status, reply.service()), (200, "web".to_owned()));

    let gw = crate::gateway_api::object(&p, "/api/v1/gateways", ns, "edge").await;
    let listeners = gw["status"]["listeners"].as_array().cloned().unwrap();
    let tcp_listener = listeners.iter().find(|l| l["name"] == "tcp").unwrap();
    assert_eq!(tcp_listener["attachedRoutes"], 3);
    assert_eq!(tcp_listener["supportedKinds"][0]["kind"], "TLSRoute");

    // A route changed, then removed: served without a restart.
    m.write(
        "a.yaml",
        &tls_route(ns, "v1", "a", &to("a.tcp.test", "beta")),
    );
    wait_greeting(&p, "a.tcp.test", Some("beta")).await;
    m.remove("a.yaml");
    wait_greeting(&p, "a.tcp.test", None).await;
}

/// Polls until a terminated connection for `sni` is greeted by `backend` (`None`: until it is
/// refused).
async fn wait_greeting(p: &Portico, sni: &str, backend: Option<&str>) {
    use tokio::io::AsyncBufReadExt;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let greeted = match try_connect(p.https, Some(sni), &[], Trust::Any).await {
            Ok(conn) => {
                let mut line = String::new();
                let mut stream = tokio::io::BufReader::new(conn.stream);
                let read =
                    tokio::time::timeout(Duration::from_secs(3), stream.read_line(&mut line));
                let _ = read.await;
                Some(line.trim_end().to_owned())
            }
            Err(_) => None,
        };
        if greeted.as_deref() == backend {
            return;
        }
        assert!(Instant::now() < deadline, "{sni}: still {greeted:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn in_kubernetes_mode_a_terminate_listener_is_served_and_its_status_written() {
    use crate::kube_support::Cluster;
    let ns = "gw-tls-term-kube";
    let ca = Authority::new("e2e ca").unwrap();
    let tcp = ca.issue(&["*.tcp.test"]).unwrap();
    let alpha = tcp_echo("alpha").await;
    let cluster = Cluster::new().await;
    let listeners = "[{name: tcp, port: 443, protocol: TLS, hostname: '*.tcp.test', tls: {mode: Terminate, certificateRefs: [{name: tcp-tls}]}}]";
    cluster.apply(&issued_secret(ns, "tcp-tls", &tcp));
    cluster.apply(
        &[
            class("portico", OURS),
            service(ns, "alpha", &ready(&[alpha])),
            gateway(ns, "edge", "portico", listeners),
            tls_route(ns, "v1alpha3", "a", "{parentRefs: [{name: edge}], hostnames: [a.tcp.test], rules: [{backendRefs: [{name: alpha, port: 80}]}]}"),
            tls_route(ns, "v1alpha3", "gone", "{parentRefs: [{name: edge}], hostnames: [gone.tcp.test], rules: [{backendRefs: [{name: missing, port: 80}]}]}"),
        ]
        .concat(),
    );
    let p = Portico::start_kube(&cluster, &[]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let conn = loop {
        let conn = try_connect(p.https, Some("a.tcp.test"), &[], Trust::Authority(&ca)).await;
        match conn {
            Ok(conn) => break conn,
            Err(e) => assert!(Instant::now() < deadline, "terminated: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(conn.leaf, leaf_of(&tcp.chain_pem));
    assert_eq!(
        talk(conn).await,
        ["alpha", "hello through TLS", "bye alpha", ""]
    );
    let refused = try_connect(p.https, Some("gone.tcp.test"), &[], Trust::Any).await;
    assert!(
        refused.is_err(),
        "a handshake for the route without backend"
    );
    let written = |name: &str| {
        let alpha = "gateway.networking.k8s.io/v1alpha3";
        let route = cluster.api.get(alpha, "TLSRoute", Some(ns), name);
        our_conditions(&route.unwrap_or(Value::Null))
    };
    while written("a") != SERVED {
        assert!(Instant::now() < deadline, "a: {:?}", written("a"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let missing = [
        "Accepted=True/Accepted",
        "ResolvedRefs=False/BackendNotFound",
    ];
    while written("gone") != missing {
        assert!(Instant::now() < deadline, "gone: {:?}", written("gone"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let listener = || {
        let gw = cluster
            .api
            .get("gateway.networking.k8s.io/v1", "Gateway", Some(ns), "edge");
        let status = gw.unwrap_or(Value::Null)["status"]["listeners"][0].clone();
        (
            status["attachedRoutes"].clone(),
            status["conditions"].clone(),
        )
    };
    loop {
        let (attached, conditions) = listener();
        let accepted = (conditions.as_array().into_iter().flatten())
            .any(|c| c["type"] == "Accepted" && c["status"] == "True");
        if attached == 2 && accepted {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "listener: {attached} {conditions}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
