//! The descriptor fit against real haproxy: a configuration fitted to a hard limit starts
//! under exactly that limit (as Portico runs it: master-worker, master CLI), and the same load
//! balancer rendered without the fit is refused by haproxy under it.

#![allow(clippy::unwrap_used)]

mod support;

use portico_model::*;
use portico_provider_haproxy::{CONFIG_FILE, Input, STATS_SOCKET, render};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A pool of `members` servers on distinct loopback addresses nobody listens on (from
/// 127.1.0.0 on, after the `first` members of the load balancer), actively checked or not.
fn pool(name: &str, first: usize, members: usize, active: bool) -> Arc<Pool> {
    let mut settings = PoolSettings::default();
    if active {
        settings.active = Some(ActiveHealth {
            path: "/healthz".into(),
            interval_ms: 60_000,
            timeout_ms: 1_000,
            healthy: 1,
            unhealthy: 1,
        });
    }
    let members = (first..first + members).map(|n| {
        let n = u32::try_from(n).unwrap();
        let address = std::net::Ipv4Addr::from(0x7f01_0000 + n);
        Member {
            id: MemberId::derive(&address.to_string()),
            address: address.into(),
            port: 9,
            weight: 1,
            ready: true,
        }
    });
    Arc::new(Pool {
        id: PoolId::derive(name),
        name: name.into(),
        service: ObjectRef::new("Service", "default", name),
        service_port: "80".into(),
        algorithm: Algorithm::RoundRobin,
        settings: Arc::new(settings),
        protocol: PoolProtocol::Http,
        members: members.collect(),
    })
}

/// One listener on `port` and pools of `active` actively checked and `passive` passively
/// checked members (10 members a pool).
fn lb(port: u16, active: usize, passive: usize) -> LoadBalancer {
    let mut pools = Vec::new();
    for (n, first) in (0..active).step_by(10).enumerate() {
        pools.push(pool(&format!("a{n}"), first, 10.min(active - first), true));
    }
    for (n, first) in (0..passive).step_by(10).enumerate() {
        pools.push(pool(
            &format!("p{n}"),
            active + first,
            10.min(passive - first),
            false,
        ));
    }
    LoadBalancer {
        id: LoadBalancerId::derive("lb"),
        name: "lb".into(),
        origin: ObjectRef::new("IngressClass", "", "portico"),
        provider: "haproxy".into(),
        vip: None,
        floating_ip: None,
        listeners: Arc::new(vec![Listener {
            id: ListenerId::derive("http"),
            name: "HTTP".into(),
            protocol: Protocol::Http,
            port,
            policies: vec![],
            default_pool: pools.first().map(|p| p.id),
            default_source: None,
            tls: None,
        }]),
        pools,
    }
}

/// `lb` rendered into `dir` for the hard `limit` (`None`: no fit), with its files.
fn render_into(dir: &Path, lb: &LoadBalancer, port: u16, limit: Option<u64>) -> Vec<Diagnostic> {
    let certificates = std::collections::BTreeMap::new();
    let rendered = render(
        lb,
        &Input {
            dir,
            binds: portico_provider_haproxy::Binds {
                http: Some(([127, 0, 0, 1], port).into()),
                ..Default::default()
            },
            certificates: &certificates,
            ca_files: &certificates,
            credentials: &portico_model::Credentials::new(),
            limits: &Limits::default(),
            tcp: Default::default(),
            access_log: None,
            descriptors: limit,
        },
    );
    support::write_files(dir, &rendered, std::iter::empty());
    rendered.diagnostics
}

/// haproxy as Portico starts it, under a hard and soft descriptor limit of `limit`.
fn start(dir: &Path, limit: u64) -> Child {
    Command::new("prlimit")
        .arg(format!("--nofile={limit}:{limit}"))
        .args(["haproxy", "-W", "-db", "-f"])
        .arg(dir.join(CONFIG_FILE))
        .arg("-S")
        .arg(dir.join("master.sock"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("prlimit and haproxy are installed")
}

/// Whether haproxy answers on its stats socket (true) or exits first (false, with what it
/// said).
fn serves(child: &mut Child, dir: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            let mut said = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut said);
            return Err(format!("haproxy exited ({status}): {said}"));
        }
        if let Ok(mut socket) = std::os::unix::net::UnixStream::connect(dir.join(STATS_SOCKET)) {
            let mut answer = String::new();
            let _ = socket.write_all(b"show info\n");
            let _ = socket.read_to_string(&mut answer);
            if answer.contains("Maxsock") {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err("haproxy did not answer in 30 s".into())
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Limits and shapes: passive checks alone too many; passive checks and connections; active
/// checks that only fit with fewer connections; active checks that do not fit at all.
#[test]
fn a_configuration_fitted_to_a_limit_starts_under_it_and_an_unfitted_one_does_not() {
    let cases = [
        (20_000, 0, 30_000),
        (1_024, 0, 2_000),
        (1_800, 800, 3_000),
        (600, 900, 0),
    ];
    for (limit, active, passive) in cases {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let lb = lb(port, active, passive);
        let dir = tempfile::tempdir().unwrap();
        let diagnostics = render_into(dir.path(), &lb, port, Some(limit));
        assert_eq!(diagnostics.len(), 1, "{limit}: {diagnostics:?}");
        let mut child = start(dir.path(), limit);
        let outcome = serves(&mut child, dir.path());
        stop(child);
        outcome.unwrap_or_else(|e| panic!("fitted to {limit}: {e}; {diagnostics:?}"));

        let unfitted = tempfile::tempdir().unwrap();
        assert!(render_into(unfitted.path(), &lb, port, None).is_empty());
        let mut child = start(unfitted.path(), limit);
        let outcome = serves(&mut child, unfitted.path());
        stop(child);
        let refused = outcome.expect_err("the unfitted configuration started");
        assert!(
            refused.contains("Cannot raise FD limit"),
            "{limit}: {refused}"
        );
    }
}
