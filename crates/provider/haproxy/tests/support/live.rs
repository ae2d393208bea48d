//! Live test support: echo backends, plain HTTP requests, a one-pool
//! haproxy model and a provider on a temporary state directory.

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use portico_model::*;
use portico_provider_haproxy::{Binary, Binds, HaproxyProvider, PlanSettings, Settings};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An HTTP/1.1 server on 127.0.0.1 that answers every request with `name`.
pub async fn echo(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let svc = service_fn(move |_req| async move {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from(
                        name,
                    ))))
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

/// `GET /` with `Connection: close`: the status and the body, or the error.
pub async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .await
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .ok_or(format!("no status in {text:?}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// Polls until `GET path` answers `status` with `body`.
pub async fn wait_for(addr: SocketAddr, path: &str, status: u16, body: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let got = get(addr, path).await;
        if got.as_ref().is_ok_and(|(s, b)| *s == status && b == body) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "wanted {status} {body:?} from {addr}{path}, got {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Pool members at these addresses, each with its ready flag.
pub fn pool_members(members: &[(SocketAddr, bool)]) -> Vec<Member> {
    (members.iter())
        .map(|(addr, ready)| Member {
            id: MemberId::derive(&addr.to_string()),
            address: addr.ip(),
            port: addr.port(),
            weight: 1,
            ready: *ready,
        })
        .collect()
}

/// A haproxy load balancer on `vip`:`port` whose one pool has the given members (ready flag).
pub fn model(port: u16, members: &[(SocketAddr, bool)]) -> Model {
    let pool = PoolId::derive("pool");
    let lb = LoadBalancerId::derive("lb");
    Model {
        load_balancers: vec![LoadBalancer {
            id: lb,
            name: "ingressclass/haproxy".into(),
            origin: portico_model::ObjectRef::new("IngressClass", "", "haproxy"),
            provider: "haproxy".into(),
            vip: Some([127, 0, 0, 1].into()),
            floating_ip: None,
            listeners: std::sync::Arc::new(vec![Listener {
                id: ListenerId::derive("http"),
                name: "HTTP".into(),
                protocol: Protocol::Http,
                port,
                policies: vec![],
                default_pool: Some(pool),
                default_source: None,
                tls: None,
            }]),
            pools: vec![std::sync::Arc::new(Pool {
                id: pool,
                name: "default_web_80".into(),
                service: ObjectRef::new("Service", "default", "web"),
                service_port: "80".into(),
                algorithm: Algorithm::RoundRobin,
                settings: Default::default(),
                protocol: PoolProtocol::Http,
                members: pool_members(members),
            })],
        }],
    }
}

pub fn provider(state: &std::path::Path) -> HaproxyProvider {
    provider_counted(state).0
}

/// A provider and its counters.
pub fn provider_counted(
    state: &std::path::Path,
) -> (
    HaproxyProvider,
    std::sync::Arc<portico_provider_haproxy::Counters>,
) {
    let counters = std::sync::Arc::new(portico_provider_haproxy::Counters::default());
    portico_statedir::ensure_private_dir(state).unwrap();
    let lock = std::sync::Arc::new(portico_statedir::lock(state).unwrap());
    let provider = HaproxyProvider::new(Settings {
        plan: PlanSettings {
            root: state.join("loadbalancer/haproxy"),
            default_binds: None::<Binds>,
            default_class: "portico".into(),
            limits: portico_model::Limits::default(),
            tcp: Default::default(),
            access_log: None,
            descriptors: None,
        },
        binary: Binary {
            haproxy: "haproxy".into(),
        },
        counters: counters.clone(),
        lock,
    })
    .unwrap();
    (provider, counters)
}

/// [`model`] with no default pool and one policy per `(path, exact)` on host `test` (the
/// host [`get`] sends) to the pool: a request no path matches gets 404.
pub fn routed(port: u16, members: &[(SocketAddr, bool)], paths: &[(&str, bool)]) -> Model {
    let mut m = model(port, members);
    let lb = &mut m.load_balancers[0];
    let mut listener = lb.listeners[0].clone();
    listener.default_pool = None;
    listener.policies = paths
        .iter()
        .map(|(path, exact)| {
            let rule = |rule_type, compare_type, value: &str| L7Rule {
                id: L7RuleId::derive(&format!("{path}/{value}")),
                rule_type,
                compare_type,
                key: None,
                value: value.to_owned(),
            };
            let compare = if *exact {
                CompareType::EqualTo
            } else {
                CompareType::PathPrefix
            };
            L7Policy {
                id: L7PolicyId::derive(path),
                action: PolicyAction::RedirectToPool {
                    pool: PoolId::derive("pool"),
                },
                rules: vec![
                    rule(RuleType::HostName, CompareType::EqualTo, "test"),
                    rule(RuleType::Path, compare, path),
                ],
                source: std::sync::Arc::new(ObjectRef::new("Ingress", "default", "web")),
                precedence: 0,
                options: None,
            }
        })
        .map(std::sync::Arc::new)
        .collect();
    portico_model::order::sort(&mut listener.policies);
    lb.listeners = std::sync::Arc::new(vec![listener]);
    m
}

/// The load balancer's directory.
pub fn dir(state: &std::path::Path) -> std::path::PathBuf {
    state
        .join("loadbalancer/haproxy")
        .join(LoadBalancerId::derive("lb").to_string())
}

/// The master's PID from the pid file.
pub fn master_pid(state: &std::path::Path) -> i32 {
    let text = std::fs::read_to_string(dir(state).join("haproxy.pid")).unwrap();
    text.trim().parse().unwrap()
}

/// The worker processes of master `pid`.
pub fn worker_pids(pid: i32) -> Vec<i32> {
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    children
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}
