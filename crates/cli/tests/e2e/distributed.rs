//! The distributed shape: `portico controller` and two `portico agent`s as separate processes
//! over a real etcd (Debian's etcd-server, started here on loopback), the agents on different
//! loopback addresses. The conformance kit runs on it (`conformance::distributed*`); the
//! tests here are its faults.

use crate::support::*;
use portico_testkit::etcd::EtcdCluster;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// What runs beside the agent a test talks to.
pub struct Rest {
    pub etcd: EtcdCluster,
    pub controller: Child,
    pub controller_admin: SocketAddr,
    pub other: Option<Portico>,
    _state: Vec<tempfile::TempDir>,
}

impl Rest {
    /// The controller's view of `ns/name`, polled until an agent serves it (status set).
    pub async fn ingress(&self, p: &Portico, ns: &str, name: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let reply = p
                .request(
                    self.controller_admin,
                    "GET",
                    "localhost",
                    "/api/v1/ingresses",
                    &[],
                    "",
                )
                .await
                .unwrap();
            let all = reply.json();
            let found = all.as_array().and_then(|a| {
                a.iter()
                    .find(|i| i["namespace"] == ns && i["name"] == name)
                    .cloned()
            });
            let found = found.unwrap_or(Value::Null);
            let has_status = found["status"]["loadBalancer"]["ingress"][0].is_object();
            if has_status || Instant::now() > deadline {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `--store` and its TLS flags for `etcd`.
fn store_args(etcd: &EtcdCluster) -> Vec<String> {
    let mut args = vec![format!("--store=etcd://{}", etcd.endpoints().join(","))];
    if let Some(tls) = etcd.tls() {
        args[0] = format!("--store=etcds://{}", etcd.endpoints().join(","));
        args.push(format!("--store-ca={}", tls.ca.display()));
        args.push(format!("--store-cert={}", tls.client_cert.display()));
        args.push(format!("--store-key={}", tls.client_key.display()));
    }
    args
}

/// Starts `portico controller` on `dir`; returns it and its admin address.
pub async fn controller(dir: &Path, etcd: &EtcdCluster, identity: &str) -> (Child, SocketAddr) {
    let mut args: Vec<String> = vec!["controller".into(), "-f".into(), dir.display().to_string()];
    args.extend(store_args(etcd));
    args.extend([
        "--admin-listen=127.0.0.1:0".to_owned(),
        "--publish-address=127.0.0.1".to_owned(),
        format!("--identity={identity}"),
    ]);
    let mut child = Command::new(BIN)
        .args(&args)
        .env("PORTICO_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the controller printed its address in time")
        .unwrap()
        .expect("the controller printed a line");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let admin = first.split_whitespace().last().unwrap().parse().unwrap();
    (child, admin)
}

/// Starts `portico agent --node NAME` on loopback address `ip` with its cache in `state`.
pub async fn agent(etcd: &EtcdCluster, name: &str, ip: &str, state: &Path) -> Portico {
    let mut args: Vec<String> = vec!["agent".into(), format!("--node={name}")];
    args.extend(store_args(etcd));
    args.extend([
        format!("--http-listen={ip}:0"),
        format!("--https-listen={ip}:0"),
        format!("--admin-listen={ip}:0"),
        format!("--state-dir={}", state.display()),
    ]);
    Portico::spawn(&args).await
}

/// etcd, a controller on `dir` and two agents (127.0.0.2 and 127.0.0.3); the agent
/// `serve_from` (0 or 1) is returned with the rest inside.
pub async fn start(dir: &Path, tls: bool, serve_from: usize) -> Portico {
    let etcd = if tls {
        EtcdCluster::start_tls()
    } else {
        EtcdCluster::start(1)
    };
    let (controller, controller_admin) = controller(dir, &etcd, "c1").await;
    let states = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let a = agent(&etcd, "node-a", "127.0.0.2", states[0].path()).await;
    let b = agent(&etcd, "node-b", "127.0.0.3", states[1].path()).await;
    let (mut served, other) = if serve_from == 0 { (a, b) } else { (b, a) };
    served.distributed = Some(Box::new(Rest {
        etcd,
        controller,
        controller_admin,
        other: Some(other),
        _state: states.into(),
    }));
    served
}

/// Polls `(host, path)` on `p` until it answers `service`, or panics after 10 s.
async fn wait_served(p: &Portico, host: &str, path: &str, service: &str) {
    p.wait_route(host, path, 200, service).await;
}

#[tokio::test]
async fn both_agents_serve_a_change_and_keep_serving_while_etcd_is_down() {
    let m = crate::backends("default", &[("web", 1), ("api", 1)]).await;
    m.write(
        "web.yaml",
        &ingress(
            "default",
            "web",
            "2024-01-01T00:00:00Z",
            &[("a.test", "/", "Prefix", "web", "80")],
        ),
    );
    let mut p = start(m.path(), false, 0).await;
    let rest = p.distributed.as_mut().unwrap();
    let other = rest.other.take().unwrap();
    wait_served(&p, "a.test", "/", "web").await;
    wait_served(&other, "a.test", "/", "web").await;

    // A change reaches both agents through etcd.
    m.write(
        "api.yaml",
        &ingress(
            "default",
            "api",
            "2024-01-02T00:00:00Z",
            &[("b.test", "/", "Prefix", "api", "80")],
        ),
    );
    wait_served(&p, "b.test", "/", "api").await;
    wait_served(&other, "b.test", "/", "api").await;

    // etcd stopped: both keep serving and say so.
    let rest = p.distributed.as_mut().unwrap();
    rest.etcd.stop(0);
    let readyz = async |agent: &Portico| {
        let r = agent
            .request(agent.admin, "GET", "localhost", "/readyz", &[], "")
            .await
            .unwrap();
        (r.status, String::from_utf8_lossy(&r.body).into_owned())
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, body) = readyz(&p).await;
        if body.contains("etcd is unreachable") {
            assert_eq!(status, 200, "an agent without etcd still serves: {body}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the agent never said etcd is unreachable: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(p.get("a.test", "/").await.service(), "web");
    assert_eq!(other.get("b.test", "/").await.service(), "api");

    // A change made meanwhile is served once etcd returns.
    m.write(
        "web.yaml",
        &ingress(
            "default",
            "web",
            "2024-01-01T00:00:00Z",
            &[("a.test", "/", "Prefix", "api", "80")],
        ),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        p.get("a.test", "/").await.service(),
        "web",
        "nothing moves without etcd"
    );
    p.distributed.as_mut().unwrap().etcd.restart(0);
    wait_served(&p, "a.test", "/", "api").await;
    wait_served(&other, "a.test", "/", "api").await;
}

#[tokio::test]
async fn an_agent_restarted_while_etcd_is_down_serves_from_its_cache() {
    let m = crate::backends("default", &[("web", 1)]).await;
    m.write(
        "web.yaml",
        &ingress(
            "default",
            "web",
            "2024-01-01T00:00:00Z",
            &[("a.test", "/", "Prefix", "web", "80")],
        ),
    );
    let etcd = EtcdCluster::start(1);
    let (_controller, _) = controller(m.path(), &etcd, "c1").await;
    let state = tempfile::tempdir().unwrap();
    let first = agent(&etcd, "node-a", "127.0.0.2", state.path()).await;
    wait_served(&first, "a.test", "/", "web").await;
    drop(first);
    let mut etcd = etcd;
    etcd.stop(0);
    // Started with etcd down: it serves what it cached.
    let again = agent(&etcd, "node-a", "127.0.0.2", state.path()).await;
    assert_eq!(again.get("a.test", "/").await.service(), "web");

    // A corrupt cache is never served in part: the agent starts empty and says why.
    drop(again);
    let cache = state.path().join("agent/node-a.cache");
    let mut bytes = std::fs::read(&cache).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&cache, bytes).unwrap();
    let mut args: Vec<String> = vec!["agent".into(), "--node=node-a".into()];
    args.extend(store_args(&etcd));
    args.extend([
        "--http-listen=127.0.0.2:0".to_owned(),
        "--https-listen=127.0.0.2:0".to_owned(),
        "--admin-listen=127.0.0.2:0".to_owned(),
        format!("--state-dir={}", state.path().display()),
    ]);
    let mut child = Command::new(BIN)
        .args(&args)
        .env("PORTICO_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let banner = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let admin: SocketAddr = banner.split_whitespace().last().unwrap().parse().unwrap();
    let http: SocketAddr = banner
        .split_whitespace()
        .nth(6)
        .unwrap()
        .trim_end_matches(',')
        .parse()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        get_status(http, "a.test", "/").await,
        404,
        "a corrupt cache serves nothing"
    );
    assert_eq!(
        get_status(admin, "localhost", "/readyz").await,
        503,
        "not ready without a state"
    );
}

/// The status of a plain GET of `path` with `Host: host` on `addr`.
async fn get_status(addr: SocketAddr, host: &str, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out);
    text.split_whitespace()
        .nth(1)
        .unwrap_or("0")
        .parse()
        .unwrap_or(0)
}

#[tokio::test]
async fn a_malformed_value_under_the_prefix_is_a_diagnostic_and_the_rest_is_served() {
    let m = crate::backends("default", &[("web", 1)]).await;
    m.write(
        "web.yaml",
        &ingress(
            "default",
            "web",
            "2024-01-01T00:00:00Z",
            &[("a.test", "/", "Prefix", "web", "80")],
        ),
    );
    let p = start(m.path(), false, 0).await;
    wait_served(&p, "a.test", "/", "web").await;
    let rest = p.distributed.as_ref().unwrap();
    rest.etcd.etcdctl(&[
        "put",
        "/portico/desired/lb/00000000-0000-0000-0000-000000000000/pool/x",
        "{garbage",
    ]);
    // The mirror publishes at commit markers: the next commit carries the bad value along.
    m.write(
        "more.yaml",
        &ingress(
            "default",
            "more",
            "2024-01-02T00:00:00Z",
            &[("b.test", "/", "Prefix", "web", "80")],
        ),
    );
    wait_served(&p, "b.test", "/", "web").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let diagnostics = p.admin_json("/api/v1/diagnostics").await.to_string();
        if diagnostics.contains("pool/x") {
            assert!(
                diagnostics.contains("not a value envelope"),
                "{diagnostics}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no diagnostic for the bad value: {diagnostics}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(p.get("a.test", "/").await.service(), "web");
}
