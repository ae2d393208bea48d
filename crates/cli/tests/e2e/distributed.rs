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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, ChildStderr, Command};
use tokio::sync::watch;

/// What runs beside the agent a test talks to.
pub struct Rest {
    pub etcd: EtcdCluster,
    pub controller: Child,
    pub controller_admin: SocketAddr,
    pub other: Option<Portico>,
    _state: Vec<tempfile::TempDir>,
}

impl Rest {
    /// The controller's view of `ns/name`, polled until an agent serves it (status set) and
    /// the agent `p` serves the controller's model too: the status says that *an* agent
    /// serves the Ingress, and the kit's requests go to `p`, which may be a moment behind.
    pub async fn ingress(&self, p: &Portico, ns: &str, name: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let all = p
                .admin_json_at(self.controller_admin, "/api/v1/ingresses")
                .await;
            let found = all.as_array().and_then(|a| {
                a.iter()
                    .find(|i| i["namespace"] == ns && i["name"] == name)
                    .cloned()
            });
            let found = found.unwrap_or(Value::Null);
            let has_status = found["status"]["loadBalancer"]["ingress"][0].is_object();
            if has_status && self.serves_controller_model(p).await || Instant::now() > deadline {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (10 s at most) until the controller has written its first state and agent `p`
    /// serves it: an agent is ready once it serves *a* state, maybe one before the files.
    async fn settle(&self, p: &Portico) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let summary = p
                .admin_json_at(self.controller_admin, "/api/v1/summary")
                .await;
            let written = summary["generation"].as_u64().unwrap_or(0) > 0;
            if written && self.serves_controller_model(p).await || Instant::now() > deadline {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether agent `p` serves as many load balancers, listeners, policies, pools and
    /// members as the controller's model holds.
    async fn serves_controller_model(&self, p: &Portico) -> bool {
        let counts = |summary: Value| {
            let c = &summary["counts"];
            [
                "loadBalancers",
                "listeners",
                "policies",
                "pools",
                "members",
                "membersReady",
            ]
            .map(|k| c[k].clone())
        };
        let want = counts(
            p.admin_json_at(self.controller_admin, "/api/v1/summary")
                .await,
        );
        let have = counts(p.admin_json("/api/v1/summary").await);
        want == have
    }
}

/// `--store` and its TLS flags for `etcd`.
pub fn store_args(etcd: &EtcdCluster) -> Vec<String> {
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
    let mut child = controller_command(dir, etcd, identity)
        .env("PORTICO_LOG", "warn")
        .spawn()
        .unwrap();
    let admin = admin_address(&mut child).await;
    (child, admin)
}

/// `portico controller` on `dir` with a free admin address, its stdout piped.
fn controller_command(dir: &Path, etcd: &EtcdCluster, identity: &str) -> Command {
    let mut args: Vec<String> = vec!["controller".into(), "-f".into(), dir.display().to_string()];
    args.extend(store_args(etcd));
    args.extend([
        "--admin-listen=127.0.0.1:0".to_owned(),
        "--publish-address=127.0.0.1".to_owned(),
        format!("--identity={identity}"),
    ]);
    let mut command = Command::new(BIN);
    command
        .args(&args)
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// The admin address a controller prints first; its later stdout is drained.
pub async fn admin_address(child: &mut Child) -> SocketAddr {
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the controller printed its address in time")
        .unwrap()
        .expect("the controller printed a line");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    first.split_whitespace().last().unwrap().parse().unwrap()
}

/// Starts `portico agent --node NAME` on loopback address `ip` with its cache in `state`.
pub async fn agent(etcd: &EtcdCluster, name: &str, ip: &str, state: &Path) -> Portico {
    agent_with(store_args(etcd), name, ip, state).await
}

/// Like [`agent`], reaching etcd through the given `--store` arguments.
async fn agent_with(store: Vec<String>, name: &str, ip: &str, state: &Path) -> Portico {
    let mut args: Vec<String> = vec!["agent".into(), format!("--node={name}")];
    args.extend(store);
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
    let rest = Rest {
        etcd,
        controller,
        controller_admin,
        other: Some(other),
        _state: states.into(),
    };
    rest.settle(&served).await;
    served.distributed = Some(Box::new(rest));
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
            let metrics = p.metrics().await;
            assert!(metrics.contains("portico_store_connected 0"), "{metrics}");
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
    // Serving a state does not wait for its cache (written once the views were quiet for a
    // second, and fsynced): wait for it, or this test kills the agent before it cached anything.
    let cache = state.path().join("agent/node-a.cache");
    let start = Instant::now();
    while !cache.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no cache written"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(first);
    let mut etcd = etcd;
    etcd.stop(0);
    // Started with etcd down: it serves what it cached.
    let again = agent(&etcd, "node-a", "127.0.0.2", state.path()).await;
    assert_eq!(again.get("a.test", "/").await.service(), "web");

    // A corrupt cache is never served in part: the agent starts empty and says why.
    drop(again);
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
    // Without a state the listeners do not accept: a request waits in the listen queue rather
    // than meet an empty route table's 404.
    let unanswered =
        tokio::time::timeout(Duration::from_secs(1), get_status(http, "a.test", "/")).await;
    assert!(
        unanswered.is_err(),
        "a corrupt cache serves nothing, not even a 404: {unanswered:?}"
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

// ---- Faults of etcd members, of the path to etcd, and of the leading controller ----

/// The agent's `/readyz` text ("" when it does not answer).
async fn readyz(p: &Portico) -> String {
    match p
        .request(p.admin, "GET", "localhost", "/readyz", &[], "")
        .await
    {
        Ok(r) => String::from_utf8_lossy(&r.body).into_owned(),
        Err(_) => String::new(),
    }
}

/// The store revision an agent's `/readyz` reports ("node N: store revision R").
fn store_revision(readyz: &str) -> Option<u64> {
    let rest = readyz.split("store revision ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// Polls `(host, path)` on `p` until it answers `status` from `service` ("" for no backend),
/// for at most `limit`; how long that took.
async fn wait_answer(
    p: &Portico,
    (host, path): (&str, &str),
    (status, service): (u16, &str),
    limit: Duration,
) -> Duration {
    let start = Instant::now();
    loop {
        let reply = p.request(p.http, "GET", host, path, &[], "").await;
        let got = reply.map(|r| (r.status, r.service()));
        if got
            .as_ref()
            .is_ok_and(|(s, svc)| *s == status && svc == service)
        {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "{host}{path}: wanted {status} from {service:?} within {limit:?}, got {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls the agent's `/readyz` until `done` accepts it, for at most `limit`; that text.
async fn wait_readyz(p: &Portico, limit: Duration, done: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let text = readyz(p).await;
        if done(&text) {
            return text;
        }
        assert!(start.elapsed() < limit, "readyz after {limit:?}: {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The index of the member that leads the etcd cluster now.
fn raft_leader(etcd: &EtcdCluster) -> usize {
    let out = etcd.etcdctl(&["endpoint", "status", "-w", "json"]);
    let all: Value = serde_json::from_str(&out).unwrap();
    let leading = |s: &&Value| s["Status"]["header"]["member_id"] == s["Status"]["leader"];
    let leader = all.as_array().unwrap().iter().find(leading).expect(&out);
    let url = leader["Endpoint"].as_str().unwrap();
    let endpoints = etcd.endpoints();
    endpoints.iter().position(|e| url.ends_with(e)).expect(&out)
}

/// Ordered steps of one Ingress: at step `i`, `a.test/` goes to `b<i>` and each `a.test/s<j>`
/// (j ≤ i) to `b<j>`.
const STEPS: usize = 10;

fn step(i: usize) -> String {
    let names: Vec<(String, String)> = (0..=i)
        .map(|j| (format!("/s{j}"), format!("b{j}")))
        .collect();
    let mut rules = vec![("a.test", "/", "Prefix", names[i].1.as_str(), "80")];
    let exact = names
        .iter()
        .map(|(p, b)| ("a.test", p.as_str(), "Exact", b.as_str(), "80"));
    rules.extend(exact);
    ingress("default", "web", "2024-01-01T00:00:00Z", &rules)
}

/// What a sampler saw of one agent, in order: the step `a.test/` was at, the store revision,
/// and when (ms after `since`) `a.test/` moved to which step.
#[derive(Debug, Default)]
struct Seen {
    steps: Vec<usize>,
    revisions: Vec<u64>,
    moves: Vec<(u128, usize)>,
}

/// Samples `p` until `done`.
async fn sample(p: &Portico, done: &AtomicBool, since: Instant) -> Seen {
    let mut seen = Seen::default();
    while !done.load(Ordering::Relaxed) {
        if let Ok(r) = p.request(p.http, "GET", "a.test", "/", &[], "").await
            && let Some(i) = r.service().strip_prefix('b').and_then(|i| i.parse().ok())
        {
            if seen.steps.last() != Some(&i) {
                seen.moves.push((since.elapsed().as_millis(), i));
            }
            seen.steps.push(i);
        }
        if let Some(revision) = store_revision(&readyz(p).await) {
            seen.revisions.push(revision);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    seen
}

/// The first place where `values` goes back, if any.
fn first_step_back<T: PartialOrd + Copy>(values: &[T]) -> Option<(usize, T, T)> {
    let back = values.windows(2).position(|w| w[1] < w[0])?;
    Some((back, values[back], values[back + 1]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_of_three_sigkilled_while_changes_are_made_loses_no_update() {
    let names: Vec<String> = (0..STEPS).map(|i| format!("b{i}")).collect();
    let services: Vec<(&str, usize)> = names.iter().map(|n| (n.as_str(), 1)).collect();
    let m = crate::backends("default", &services).await;
    m.write("web.yaml", &step(0));
    let mut etcd = EtcdCluster::start(3);
    let (_controller, _) = controller(m.path(), &etcd, "c1").await;
    let state = tempfile::tempdir().unwrap();
    let p = agent(&etcd, "node-a", "127.0.0.2", state.path()).await;
    let limit = Duration::from_secs(15);
    wait_answer(&p, ("a.test", "/"), (200, "b0"), limit).await;

    let done = AtomicBool::new(false);
    let since = Instant::now();
    let changes = async {
        let mut killed = None;
        for i in 1..STEPS {
            if i == 4 {
                let leader = raft_leader(&etcd);
                let at = since.elapsed().as_millis();
                eprintln!("SIGKILL of etcd member {leader} (the raft leader) at {at} ms");
                tokio::task::block_in_place(|| etcd.kill(leader));
                killed = Some(leader);
            }
            if i == 8
                && let Some(member) = killed
            {
                tokio::task::block_in_place(|| etcd.restart(member));
            }
            eprintln!("step {i} written at {} ms", since.elapsed().as_millis());
            m.write("web.yaml", &step(i));
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let last = format!("b{}", STEPS - 1);
        wait_answer(&p, ("a.test", "/"), (200, &last), limit).await;
        done.store(true, Ordering::Relaxed);
    };
    let (seen, ()) = tokio::join!(sample(&p, &done, since), changes);

    // No lost update: the agent serves exactly the last state.
    for j in 0..STEPS {
        let path = format!("/s{j}");
        let reply = p.get("a.test", &path).await;
        assert_eq!(reply.service(), format!("b{j}"), "a.test{path}");
    }
    assert_eq!(
        p.get("a.test", "/").await.service(),
        format!("b{}", STEPS - 1)
    );
    // No reordered or doubled update: what the agent served only moved forward.
    eprintln!(
        "{} samples; a.test/ moved (ms, step): {:?}; revisions {:?}..{:?}",
        seen.steps.len(),
        seen.moves,
        seen.revisions.first(),
        seen.revisions.last()
    );
    assert!(seen.steps.len() > 20, "too few samples: {seen:?}");
    assert_eq!(first_step_back(&seen.steps), None, "a.test/ went back");
    assert_eq!(
        first_step_back(&seen.revisions),
        None,
        "the revision went back"
    );
}

/// A TCP proxy on loopback that can cut every connection and refuse new ones, to disconnect
/// one process from etcd while etcd keeps running.
struct Proxy {
    port: u16,
    cut: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (cut, cut_rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if !*cut_rx.borrow() {
                    tokio::spawn(forward(client, target.clone(), cut_rx.clone()));
                }
            }
        });
        Proxy { port, cut, task }
    }

    fn store_args(&self) -> Vec<String> {
        vec![format!("--store=etcd://127.0.0.1:{}", self.port)]
    }

    fn cut(&self) {
        self.cut.send_replace(true);
    }

    fn restore(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut.send_replace(true);
    }
}

async fn forward(mut client: TcpStream, target: String, mut cut: watch::Receiver<bool>) {
    let Ok(mut server) = TcpStream::connect(target).await else {
        return;
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = cut.wait_for(|cut| *cut) => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_compacted_while_an_agent_is_disconnected_relists_and_converges() {
    let m = crate::backends("default", &[("web", 1), ("api", 1)]).await;
    let created = "2024-01-01T00:00:00Z";
    let to = |name: &str, host: &str, svc: &str| {
        ingress(
            "default",
            name,
            created,
            &[(host, "/", "Prefix", svc, "80")],
        )
    };
    m.write("web.yaml", &to("web", "a.test", "web"));
    m.write("old.yaml", &to("old", "b.test", "web"));
    let etcd = EtcdCluster::start(1);
    let proxy = Proxy::start(etcd.endpoints()[0].clone()).await;
    let (_controller, _) = controller(m.path(), &etcd, "c1").await;
    let states = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let cut = agent_with(proxy.store_args(), "node-a", "127.0.0.2", states[0].path()).await;
    let witness = agent(&etcd, "node-b", "127.0.0.3", states[1].path()).await;
    let limit = Duration::from_secs(10);
    for p in [&cut, &witness] {
        wait_answer(p, ("a.test", "/"), (200, "web"), limit).await;
        wait_answer(p, ("b.test", "/"), (200, "web"), limit).await;
    }

    proxy.cut();
    wait_readyz(&cut, limit, |r| r.contains("etcd is unreachable")).await;
    m.remove("old.yaml");
    m.write("web.yaml", &to("web", "a.test", "api"));
    m.write("new.yaml", &to("new", "c.test", "api"));
    wait_answer(&witness, ("b.test", "/"), (404, ""), limit).await;
    wait_answer(&witness, ("a.test", "/"), (200, "api"), limit).await;
    wait_answer(&witness, ("c.test", "/"), (200, "api"), limit).await;
    // The cut agent still serves what it had: the changes did not reach it.
    assert_eq!(cut.get("a.test", "/").await.service(), "web");
    assert_eq!(cut.get("b.test", "/").await.service(), "web");
    assert_eq!(cut.get("c.test", "/").await.status, 404);
    let compacted = etcd.compact();
    let stale = store_revision(&readyz(&cut).await).unwrap();
    assert!(
        i64::try_from(stale).unwrap() < compacted,
        "the cut agent's revision {stale} is history now (compacted at {compacted})"
    );

    proxy.restore();
    let took = wait_answer(&cut, ("b.test", "/"), (404, ""), Duration::from_secs(20)).await;
    eprintln!("the cut agent converged {took:?} after the path to etcd came back");
    wait_answer(&cut, ("a.test", "/"), (200, "api"), limit).await;
    wait_answer(&cut, ("c.test", "/"), (200, "api"), limit).await;
    let newest = store_revision(&readyz(&witness).await).unwrap();
    // Caught up with the last commit, and following etcd again.
    let caught_up = |r: &str| store_revision(r) == Some(newest) && !r.contains("unreachable");
    wait_readyz(&cut, limit, caught_up).await;
}

/// Lines a process writes on stderr, collected as it runs.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn collect(stderr: ChildStderr) -> Log {
        let log = Log::default();
        let into = log.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                into.0.lock().unwrap().push(line);
            }
        });
        log
    }

    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// The index of the first line that says `text`.
    fn find(&self, text: &str) -> Option<usize> {
        self.lines().iter().position(|l| l.contains(text))
    }

    /// (line index, revision) of each commit the controller logged.
    fn writes(&self) -> Vec<(usize, i64)> {
        let revision = |l: &str| {
            let rest = l.split("revision=").nth(1)?;
            rest.split_whitespace().next()?.parse().ok()
        };
        (self.lines().iter().enumerate())
            .filter(|(_, l)| l.contains("desired state written to etcd"))
            .filter_map(|(i, l)| Some((i, revision(l)?)))
            .collect()
    }
}

/// A `portico controller` logging at info into a [`Log`].
struct Logged {
    child: Child,
    log: Log,
}

async fn logged_controller(dir: &Path, etcd: &EtcdCluster, identity: &str) -> Logged {
    let mut child = controller_command(dir, etcd, identity)
        .env("PORTICO_LOG", "info")
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Log::collect(child.stderr.take().unwrap());
    admin_address(&mut child).await;
    Logged { child, log }
}

/// The identities standing in the controllers' election, oldest (the leader) first.
fn candidates(etcd: &EtcdCluster) -> Vec<String> {
    let args = ["get", "/portico/election/", "--prefix", "--sort-by=CREATE"];
    let out = etcd.etcdctl(&[&args[..], &["--order=ASCEND", "--print-value-only"]].concat());
    out.lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The controllers' leader lease (`LEADER_TTL` in portico-app).
const LEADER_TTL: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_one_writes_and_the_other_takes_over_after_sigkill() {
    let m = crate::backends("default", &[("web", 1), ("api", 1)]).await;
    let created = "2024-01-01T00:00:00Z";
    let to = |name: &str, host: &str, svc: &str| {
        ingress(
            "default",
            name,
            created,
            &[(host, "/", "Prefix", svc, "80")],
        )
    };
    m.write("web.yaml", &to("web", "a.test", "web"));
    let etcd = EtcdCluster::start(1);
    let mut controllers = vec![
        ("c1", logged_controller(m.path(), &etcd, "c1").await),
        ("c2", logged_controller(m.path(), &etcd, "c2").await),
    ];
    let state = tempfile::tempdir().unwrap();
    let p = agent(&etcd, "node-a", "127.0.0.2", state.path()).await;
    let limit = Duration::from_secs(10);
    wait_answer(&p, ("a.test", "/"), (200, "web"), limit).await;
    let start = Instant::now();
    let standing = loop {
        let standing = candidates(&etcd);
        if standing.len() == 2 || start.elapsed() > limit {
            break standing;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(standing.len(), 2, "both controllers campaign: {standing:?}");
    let leader = controllers
        .iter()
        .position(|(id, _)| *id == standing[0])
        .unwrap();
    let (leader_id, mut leading) = controllers.remove(leader);
    let (standby_id, standby) = controllers.remove(0);
    eprintln!("{leader_id} leads, {standby_id} stands by");

    // A change while both run: served, written by the leader only.
    m.write("web.yaml", &to("web", "a.test", "api"));
    wait_answer(&p, ("a.test", "/"), (200, "api"), limit).await;
    let before = standby.log.lines().len();
    assert!(
        !leading.log.writes().is_empty(),
        "{:#?}",
        leading.log.lines()
    );
    assert_eq!(
        standby.log.writes(),
        vec![],
        "the standby wrote while not leading"
    );

    // SIGKILL of the leader; a change made right after is served once the standby leads.
    leading.child.start_kill().unwrap();
    leading.child.wait().await.unwrap();
    let killed = Instant::now();
    m.write("more.yaml", &to("more", "b.test", "web"));
    let within = LEADER_TTL + Duration::from_secs(3);
    wait_answer(&p, ("b.test", "/"), (200, "web"), within).await;
    let takeover = killed.elapsed();
    eprintln!("takeover: the change was served {takeover:?} after the SIGKILL of {leader_id}");

    let lines = standby.log.lines();
    let leads = standby.log.find("leading: this controller writes");
    let leads = leads.unwrap_or_else(|| panic!("{standby_id} never led: {lines:#?}"));
    assert!(
        leads >= before,
        "{standby_id} led before the kill: {lines:#?}"
    );
    let writes = standby.log.writes();
    assert!(!writes.is_empty(), "{standby_id} never wrote: {lines:#?}");
    assert!(
        writes.iter().all(|(line, _)| *line > leads),
        "{standby_id} wrote before it led: {lines:#?}"
    );
    let last_of_old = leading.log.writes().last().unwrap().1;
    assert!(
        writes[0].1 > last_of_old,
        "the new leader's writes follow the old one's"
    );
    assert_eq!(
        candidates(&etcd),
        vec![standby_id.to_owned()],
        "the dead leader's lease ran out"
    );
}
