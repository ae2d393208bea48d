//! Services' load balancers served by haproxy (`mode tcp`): the configuration passes
//! `haproxy -c`, carries what the L4 kit needs, and a live haproxy serves TCP and takes
//! member changes through the runtime API without breaking established connections.

#![allow(clippy::unwrap_used)]

mod support;

use portico_model::*;
use portico_provider::{CaBundles, Certificates, Provider};
use portico_testkit::free_port;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// A Service's load balancer on `vip`: a TCP listener per `(port, pool settings)` and a UDP
/// listener on `udp`, each to a pool of `members`.
fn service_lb(
    vip: IpAddr,
    tcp: &[(u16, Algorithm, PoolSettings)],
    udp: Option<u16>,
    members: &[(SocketAddr, bool)],
) -> LoadBalancer {
    // The id the live support names its directory by.
    let id = LoadBalancerId::derive("lb");
    let origin = ObjectRef::new("Service", "apps", "tcp");
    let mut listeners = Vec::new();
    let mut pools = Vec::new();
    let mut add = |protocol: Protocol, port: u16, algorithm: Algorithm, settings: PoolSettings| {
        let pool = PoolId::derive(&format!("pool/{port}"));
        listeners.push(Listener {
            id: ListenerId::derive(&format!("{id}/listener/{protocol:?}/{port}")),
            name: format!("{protocol:?}:{port}"),
            protocol,
            port,
            policies: vec![],
            default_pool: Some(pool),
            default_source: Some(origin.clone()),
            tls: None,
        });
        pools.push(Pool {
            id: pool,
            name: format!("apps_tcp_{port}"),
            service: origin.clone(),
            service_port: port.to_string(),
            algorithm,
            settings: std::sync::Arc::new(settings),
            protocol: PoolProtocol::Http,
            members: support::live::pool_members(members),
        });
    };
    for (port, algorithm, settings) in tcp {
        add(Protocol::Tcp, *port, algorithm.clone(), settings.clone());
    }
    if let Some(port) = udp {
        add(
            Protocol::Udp,
            port,
            Algorithm::default(),
            PoolSettings::default(),
        );
    }
    LoadBalancer {
        id,
        name: "service/apps/tcp".into(),
        origin,
        provider: "haproxy".into(),
        vip: Some(vip),
        floating_ip: None,
        listeners: std::sync::Arc::new(listeners),
        pools: pools.into_iter().map(std::sync::Arc::new).collect(),
    }
}

fn sticky_ranged_proxied() -> PoolSettings {
    PoolSettings {
        client_affinity_timeout_s: Some(60),
        allow_sources: vec!["127.0.0.2/32".parse().unwrap(), "::1/128".parse().unwrap()],
        proxy_protocol: Some(ProxyProtocol::V2),
        ..Default::default()
    }
}

#[test]
fn a_services_tcp_listeners_render_in_mode_tcp_and_pass_the_check() {
    let a: SocketAddr = "127.0.0.1:9001".parse().unwrap();
    let b: SocketAddr = "127.0.0.1:9002".parse().unwrap();
    let lb = service_lb(
        [127, 0, 60, 1].into(),
        &[
            (7001, Algorithm::default(), PoolSettings::default()),
            (
                7002,
                Algorithm::Hash(HashKey::ClientAddress),
                sticky_ranged_proxied(),
            ),
        ],
        Some(5353),
        &[(a, true), (b, false)],
    );
    support::check(&lb).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rendered = support::render_in(&lb, dir.path());
    let conf = &rendered.config;
    assert!(conf.contains("    mode tcp\n"), "{conf}");
    assert!(!conf.contains("http-request"), "no HTTP rules: {conf}");
    assert!(conf.contains("    bind 127.0.60.1:7001\n"), "{conf}");
    assert!(conf.contains("    bind 127.0.60.1:7002\n"), "{conf}");
    assert!(!conf.contains(":5353"), "UDP is not bound: {conf}");
    assert!(
        conf.contains(
            "    balance hash src,concat(:,sess.portico_src_port)\n    hash-type consistent\n"
        ),
        "{conf}"
    );
    assert!(conf.contains("    balance source\n    hash-type consistent\n    stick-table type ipv6 size 1m expire 60s\n    stick on src\n"), "{conf}");
    assert!(
        conf.contains("    tcp-request connection reject unless { src 127.0.0.2/32 ::1/128 }\n"),
        "{conf}"
    );
    assert!(
        conf.contains("    timeout connect 5s\n    timeout client 1h")
            || conf.contains("    timeout client 3600s\n"),
        "{conf}"
    );
    assert!(
        conf.contains("    retries 2\n    option redispatch 1\n"),
        "{conf}"
    );
    let proxied = conf.lines().filter(|l| l.contains("send-proxy-v2")).count();
    assert_eq!(
        proxied, 3,
        "two members and the spare of the proxied pool: {conf}"
    );
    assert!(
        conf.contains(&format!("{a} weight 1 send-proxy-v2\n")),
        "{conf}"
    );
    assert!(
        conf.contains(&format!("{b} weight 1 disabled\n")),
        "unready: {conf}"
    );
    let udp = (rendered.diagnostics.iter()).find(|d| {
        d.message
            .contains("port 5353 (Udp) is not served by provider haproxy")
    });
    assert!(udp.is_some(), "{:?}", rendered.diagnostics);
    assert_eq!(udp.unwrap().object.kind, "Service");
}

/// A TCP member that greets each connection with `<name>\n`, then echoes.
async fn member(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                if s.write_all(format!("{name}\n").as_bytes()).await.is_ok() {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                }
            });
        }
    });
    addr
}

/// Connects and reads the greeting: the member's name and the connection.
async fn connect(addr: SocketAddr) -> std::io::Result<(String, BufReader<TcpStream>)> {
    let stream = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr))
        .await
        .map_err(|_| std::io::ErrorKind::TimedOut)??;
    let mut stream = BufReader::new(stream);
    let mut line = String::new();
    let n = tokio::time::timeout(Duration::from_secs(2), stream.read_line(&mut line))
        .await
        .map_err(|_| std::io::ErrorKind::TimedOut)??;
    if n == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok((line.trim().to_owned(), stream))
}

async fn echo(stream: &mut BufReader<TcpStream>, text: &str) {
    stream
        .get_mut()
        .write_all(format!("{text}\n").as_bytes())
        .await
        .unwrap();
    let mut back = String::new();
    tokio::time::timeout(Duration::from_secs(2), stream.read_line(&mut back))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back.trim(), text);
}

/// The members new connections reach, once `want` is all of them.
async fn wait_members(addr: SocketAddr, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..30 {
            if let Ok((name, _)) = connect(addr).await {
                seen.insert(name);
            }
        }
        if seen.iter().map(String::as_str).eq(want.iter().copied()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "reaching {seen:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_serves_a_services_tcp_port_and_member_changes_keep_connections() {
    let state = tempfile::tempdir().unwrap();
    let (a, b) = (member("a").await, member("b").await);
    let port = free_port();
    let vip: IpAddr = [127, 0, 0, 1].into();
    let model = |members: &[(SocketAddr, bool)]| Model {
        load_balancers: vec![service_lb(
            vip,
            &[(port, Algorithm::default(), PoolSettings::default())],
            None,
            members,
        )],
    };
    let p = support::live::provider(state.path());
    let none = Certificates::new();
    let first = model(&[(a, true)]);
    assert!(p.apply(&first, &none, &CaBundles::new()).is_empty());
    let front = SocketAddr::new(vip, port);
    wait_members(front, &["a"]).await;
    let (name, mut held) = connect(front).await.unwrap();
    assert_eq!(name, "a");
    let pid = support::live::master_pid(state.path());
    let workers = support::live::worker_pids(pid);

    // b joins through a spare slot, then a leaves: no reload, and the connection to a stays.
    let all: std::collections::HashSet<PoolId> =
        first.load_balancers[0].pools.iter().map(|p| p.id).collect();
    p.update_members(&model(&[(a, true), (b, true)]), &all);
    wait_members(front, &["a", "b"]).await;
    echo(&mut held, "after b joined").await;
    p.update_members(&model(&[(b, true)]), &all);
    wait_members(front, &["b"]).await;
    echo(&mut held, "after a left").await;
    assert_eq!(
        support::live::worker_pids(pid),
        workers,
        "the same worker serves: no reload"
    );
    drop(held);
    p.shutdown(false).await;
}
