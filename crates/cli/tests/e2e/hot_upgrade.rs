//! Zero-downtime starts and upgrades of `portico run`: no answer from an empty route table,
//! and (SIGUSR2, `portico upgrade`) the listening sockets handed to the new process.

use crate::support::*;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const HOST: &str = "hot.test";

/// `hot.test` → Service `web`, with `extra` more Ingresses (hosts `extra-<i>.test`) so that
/// loading takes a while.
pub async fn manifests(extra: usize) -> Manifests {
    let m = crate::backends("hot", &[("web", 2)]).await;
    let created = "2026-01-01T00:00:00Z";
    let mut y = ingress("hot", "web", created, &[(HOST, "/", "Prefix", "web", "80")]);
    for i in 0..extra {
        let host = format!("extra-{i}.test");
        let name = format!("extra-{i}");
        let rules = [(host.as_str(), "/", "Prefix", "web", "80")];
        y.push_str(&ingress("hot", &name, created, &rules));
    }
    m.write("ingresses.yaml", &y);
    m
}

/// A WebSocket echo backend behind `ws.test` (path `/chat`).
async fn chat(m: &Manifests) {
    let chat = service(
        "hot",
        "chat",
        &ready(&[crate::websocket::echo_backend().await]),
    );
    let rules = [("ws.test", "/", "Prefix", "chat", "80")];
    let chat_ingress = ingress("hot", "chat", "2026-01-01T00:00:00Z", &rules);
    m.write("chat.yaml", &format!("{chat}{chat_ingress}"));
}

/// `portico run` of `dir` with HTTP on `port` and the other listeners on ports the system
/// picks.
fn args_on(dir: &std::path::Path, port: u16, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec!["run".into(), "-f".into(), dir.display().to_string()];
    args.push(format!("--http-listen=127.0.0.1:{port}"));
    args.extend(["--https-listen=127.0.0.1:0", "--admin-listen=127.0.0.1:0"].map(String::from));
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// What a client opening a new connection per request saw.
#[derive(Debug, Default)]
pub struct Seen {
    pub ok: usize,
    /// Connections refused (nothing listening).
    pub refused: usize,
    /// Anything else: statuses other than 200, cut connections, with what happened.
    pub failed: Vec<String>,
}

/// A client that opens a new connection for each `GET /` to `host`, one after the other,
/// until stopped.
pub struct NewConnections {
    stop: Arc<std::sync::atomic::AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl NewConnections {
    pub fn start(addr: SocketAddr, host: &str) -> NewConnections {
        NewConnections::start_for(addr, host, "web")
    }

    /// [`NewConnections::start`], expecting answers from `service`.
    pub fn start_for(addr: SocketAddr, host: &str, service: &str) -> NewConnections {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (flag, counts, host) = (stop.clone(), seen.clone(), host.to_owned());
        let service = service.to_owned();
        let task = tokio::spawn(async move {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let outcome = one_request(addr, &host, &service).await;
                {
                    let mut seen = counts.lock().unwrap();
                    match outcome {
                        Outcome::Ok => seen.ok += 1,
                        Outcome::Refused => seen.refused += 1,
                        Outcome::Failed(why) => seen.failed.push(why),
                    }
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        NewConnections { stop, seen, task }
    }

    /// 200s so far.
    pub fn ok(&self) -> usize {
        self.seen.lock().unwrap().ok
    }

    pub async fn finish(self) -> Seen {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.await.unwrap();
        Arc::try_unwrap(self.seen).unwrap().into_inner().unwrap()
    }
}

enum Outcome {
    Ok,
    Refused,
    Failed(String),
}

async fn one_request(addr: SocketAddr, host: &str, service: &str) -> Outcome {
    let mut stream = match TcpStream::connect(addr).await {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Outcome::Refused,
        Err(e) => return Outcome::Failed(format!("connect: {e}")),
    };
    let request = format!("GET / HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
    if let Err(e) = stream.write_all(request.as_bytes()).await {
        return Outcome::Failed(format!("write: {e}"));
    }
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer));
    match read.await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Outcome::Failed(format!("read: {e}")),
        Err(_) => return Outcome::Failed("no answer within 20 s".to_owned()),
    }
    let text = String::from_utf8_lossy(&answer);
    let status = text.lines().next().unwrap_or_default().to_owned();
    if status.starts_with("HTTP/1.1 200") && text.contains(&format!("\"service\":\"{service}\"")) {
        Outcome::Ok
    } else {
        Outcome::Failed(format!("answered {status:?}"))
    }
}

/// `portico run` started while a client already hammers its port: it is refused or waits
/// until the manifests are served, and is never answered 404 from an empty route table.
#[tokio::test]
async fn a_starting_portico_never_answers_from_an_empty_route_table() {
    let m = manifests(300).await;
    let port = free_port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut clients: Vec<_> = (0..4).map(|_| NewConnections::start(addr, HOST)).collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let p = Portico::spawn(&args_on(m.path(), port, &["--access-log=off"])).await;
    p.wait_route(HOST, "/", 200, "web").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while clients.iter().map(NewConnections::ok).sum::<usize>() < 40 {
        assert!(
            std::time::Instant::now() < deadline,
            "the clients were not served"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut refused = 0;
    for client in clients.drain(..) {
        let seen = client.finish().await;
        let first = seen.failed.first();
        assert!(
            seen.failed.is_empty(),
            "{} failed, first {first:?}",
            seen.failed.len()
        );
        refused += seen.refused;
    }
    eprintln!("refused before the start: {refused}");
}

/// `portico upgrade --pid pid` for a process with state directory `state`: the new PID, or
/// what it printed on failure.
pub async fn upgrade(pid: u32, state: &std::path::Path) -> Result<u32, String> {
    let out = tokio::process::Command::new(BIN)
        .args(["upgrade", "--pid", &pid.to_string(), "--state-dir"])
        .arg(state)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("{}{stdout}", String::from_utf8_lossy(&out.stderr)));
    }
    // "portico upgrade: PID N serves; …"
    let new = stdout
        .split_whitespace()
        .nth(3)
        .and_then(|n| n.parse().ok());
    new.ok_or_else(|| format!("unexpected output {stdout:?}"))
}

/// Kills a process by PID when dropped (the processes upgrades start are not the test's
/// children).
pub struct KillOnDrop(pub u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &self.0.to_string()])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// A client making HTTPS requests to `host`, each on a new TLS connection, until stopped:
/// (200s, failures).
pub fn https_new_connections(
    addr: SocketAddr,
    host: &'static str,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<(usize, Vec<String>)> {
    use crate::tls_support::{H1, Trust, try_connect};
    tokio::spawn(async move {
        let (mut ok, mut failed) = (0, Vec::new());
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let one = tokio::spawn(async move {
                let conn = try_connect(addr, Some(host), &[b"http/1.1"], Trust::Any).await;
                let conn = conn.map_err(|e| format!("TLS connect: {e}"))?;
                let answer = H1::over(conn).await.get(host, "/").await;
                match answer.status {
                    200 => Ok(()),
                    status => Err(format!("HTTPS answered {status}")),
                }
            });
            match one.await {
                Ok(Ok(())) => ok += 1,
                Ok(Err(why)) => failed.push(why),
                Err(e) => failed.push(format!("HTTPS request: {e}")),
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        (ok, failed)
    })
}

/// A keep-alive client (hyper's pooled client: it reuses connections, and opens new ones
/// when a response says `Connection: close`) until stopped: (200s, failures).
fn keep_alive(
    addr: SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<(usize, Vec<String>)> {
    keep_alive_to(addr, HOST, stop)
}

/// [`keep_alive`] to `host`.
pub fn keep_alive_to(
    addr: SocketAddr,
    host: &'static str,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<(usize, Vec<String>)> {
    use http_body_util::BodyExt as _;
    tokio::spawn(async move {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<http_body_util::Empty<bytes::Bytes>>();
        let (mut ok, mut failed) = (0, Vec::new());
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let req = http::Request::get(format!("http://{addr}/"))
                .header("host", host)
                .body(http_body_util::Empty::new())
                .unwrap();
            match client.request(req).await {
                Ok(resp) if resp.status() == 200 => match resp.into_body().collect().await {
                    Ok(_) => ok += 1,
                    Err(e) => failed.push(format!("keep-alive body: {e}")),
                },
                Ok(resp) => failed.push(format!("keep-alive answered {}", resp.status())),
                Err(e) => failed.push(format!("keep-alive: {e:?}")),
            }
        }
        (ok, failed)
    })
}

/// HTTP (keep-alive and new connections), HTTPS, a WebSocket, an l4 TCP stream and a UDP
/// flow, through 10 upgrades: nothing fails, nothing is refused, the WebSocket and the
/// stream stay open (their process drains until they end), and every old process exits.
#[tokio::test]
async fn ten_upgrades_under_load_fail_no_request_and_keep_tunnels_and_flows() {
    use crate::l4::{Endpoint, l4_service, tcp_endpoint, tcp_pod, udp_pod, vip_of, wait_connect};
    use crate::websocket::{handshake, round_trip};
    let m = manifests(0).await;
    chat(&m).await;
    let (pt, pu) = (free_port(), free_port());
    let ports = format!(
        "  - {{name: tcp, port: {pt}, protocol: TCP, targetPort: web}}\n  - {{name: dns, port: {pu}, protocol: UDP, targetPort: dns}}\n"
    );
    let udp = Endpoint {
        ports: vec![("dns", "UDP", udp_pod("u0").await.port())],
        ready: true,
    };
    let endpoints = [tcp_endpoint(&["tcp"], tcp_pod("t0").await, true), udp];
    // A fixed VIP: with --vip-pool the Ingresses would move to a VIP of their own too.
    let fixed = "  loadBalancerIP: 127.0.33.5\n";
    m.write("l4.yaml", &l4_service("flows", fixed, &ports, &endpoints));
    let flags = [
        "--access-log=off",
        "--shutdown-grace=1s",
        "--shutdown-timeout=120s",
    ];
    let p = Portico::start_with_state(m.path(), &flags).await;
    let state = p.state_dir();
    p.wait_route(HOST, "/", 200, "web").await;
    let vip = vip_of(&p, "flows").await;

    let mut ws = TcpStream::connect(p.http).await.unwrap();
    handshake(&mut ws, "ws.test", "/chat").await.unwrap();
    let hello = round_trip(&mut ws, "hello").await;
    assert_eq!(hello.as_deref(), Some("echo: hello"));
    let mut stream = wait_connect(SocketAddr::new(vip, pt)).await;
    let flow = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let udp_addr = SocketAddr::new(vip, pu);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let kept = keep_alive(p.http, stop.clone());
    let tls = https_new_connections(p.https, HOST, stop.clone());
    let fresh = NewConnections::start(p.http, HOST);

    let first = p.pid().unwrap();
    let mut pids = vec![first];
    let mut guards = vec![KillOnDrop(first)];
    for i in 1..=10 {
        let old = *pids.last().unwrap();
        let new = upgrade(old, &state)
            .await
            .unwrap_or_else(|e| panic!("upgrade {i}: {e}"));
        guards.push(KillOnDrop(new));
        pids.push(new);
        let text = format!("after upgrade {i}");
        assert_eq!(
            round_trip(&mut ws, &text).await,
            Some(format!("echo: {text}"))
        );
        stream.echo(&text).await.unwrap();
        // HTTP/3 goes on on the handed-over UDP socket.
        let mut h3 = portico_testkit::H3Client::connect(p.https, HOST)
            .await
            .unwrap_or_else(|e| panic!("HTTP/3 after upgrade {i}: {e}"));
        let answer = h3.get(HOST, "/").await;
        let status = answer.map(|a| a.status.as_u16());
        assert_eq!(status, Ok(200), "HTTP/3 after upgrade {i}");
        flow.send_to(text.as_bytes(), udp_addr).await.unwrap();
        let mut buf = [0u8; 256];
        let got = tokio::time::timeout(Duration::from_secs(3), flow.recv_from(&mut buf)).await;
        let (n, _) = got.expect("the UDP flow answers").unwrap();
        assert_eq!(&buf[..n], format!("u0:{text}").as_bytes());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = fresh.finish().await;
    let (kept, tls) = (kept.await.unwrap(), tls.await.unwrap());
    eprintln!(
        "10 upgrades: {} new-connection, {} keep-alive, {} HTTPS requests answered",
        seen.ok, kept.0, tls.0
    );
    assert!(seen.failed.is_empty() && seen.refused == 0, "{seen:?}");
    assert!(kept.1.is_empty(), "keep-alive failures: {:?}", kept.1);
    assert!(tls.1.is_empty(), "HTTPS failures: {:?}", tls.1);
    assert!(seen.ok > 0 && kept.0 > 0 && tls.0 > 0);
    // Every old process but the first (which carries the tunnel and the stream) has exited.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pids[1..10].iter().any(|&pid| !gone(pid)) {
        assert!(
            std::time::Instant::now() < deadline,
            "old processes still run"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !gone(first),
        "the first process drains while its tunnel is open"
    );
    drop((ws, stream));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !gone(first) {
        assert!(
            std::time::Instant::now() < deadline,
            "the first process never exits"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(p.get(HOST, "/").await.status, 200);
    drop(guards);
}

/// A new binary that cannot start leaves the old process serving, and `portico upgrade` says
/// why.
#[tokio::test]
async fn a_broken_new_binary_leaves_the_old_process_serving() {
    let m = manifests(0).await;
    let bin = tempfile::tempdir().unwrap();
    let program = bin.path().join("portico");
    std::fs::copy(BIN, &program).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut args = Portico::run_args(m.path(), &["--access-log=off"]);
    args.push(format!("--state-dir={}", state.path().display()));
    let p = Portico::spawn_program(&program, &args).await;
    p.wait_route(HOST, "/", 200, "web").await;
    // The binary at the path the process was started from is now a script that fails.
    std::fs::remove_file(&program).unwrap();
    std::fs::write(&program, "#!/bin/sh\necho broken >&2\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let load = NewConnections::start(p.http, HOST);
    let pid = p.pid().unwrap();
    let why = upgrade(pid, state.path()).await.unwrap_err();
    assert!(
        why.contains("exited (exit status: 1) before it was ready"),
        "{why}"
    );
    assert!(why.contains(&format!("PID {pid} serves on")), "{why}");
    assert!(!gone(pid));
    assert_eq!(p.get(HOST, "/").await.status, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while load.ok() < 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "the old process stopped serving"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seen = load.finish().await;
    assert!(seen.failed.is_empty() && seen.refused == 0, "{seen:?}");
    // Once the binary is good again, the upgrade goes through.
    std::fs::remove_file(&program).unwrap();
    std::fs::copy(BIN, &program).unwrap();
    let new = upgrade(pid, state.path()).await.unwrap();
    let _new = KillOnDrop(new);
    assert_ne!(new, pid);
    assert_eq!(p.get(HOST, "/").await.status, 200);
}

/// Each haproxy master under the state directory `state` (its PID file) and its workers (the
/// processes whose parent it is).
pub fn haproxy_processes(state: &std::path::Path) -> Vec<(u32, Vec<u32>)> {
    let root = state.join("loadbalancer/haproxy");
    let mut masters: Vec<u32> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("haproxy.pid")).ok())
        .filter_map(|pid| pid.trim().parse().ok())
        .collect();
    masters.sort_unstable();
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (_, rest) = stat.rsplit_once(") ")?;
            let mut fields = rest.split_whitespace();
            let state = fields.next()?;
            let ppid = fields.next()?.parse().ok()?;
            (state != "Z").then_some((pid, ppid))
        })
        .collect();
    masters
        .into_iter()
        .map(|master| {
            let mut workers: Vec<u32> = (parents.iter())
                .filter(|(_, ppid)| *ppid == master)
                .map(|(pid, _)| *pid)
                .collect();
            workers.sort_unstable();
            (master, workers)
        })
        .collect()
}

/// Waits until `pid` has exited.
pub async fn until_gone(pid: u32, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !gone(pid) {
        assert!(std::time::Instant::now() < deadline, "{what} still runs");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// With `--provider haproxy`, haproxy runs on across upgrades: under keep-alive,
/// new-connection and HTTPS load with an open WebSocket, ten upgrades fail no request and keep
/// the WebSocket, and the haproxy master and its workers are the same processes before and after (each new Portico adopts them through their PID
/// file and master socket, and its configuration being the same, does not reload them). A
/// change after the upgrades is served: the adopted haproxy is reloaded (its master stays).
/// A plain SIGTERM then stops haproxy with Portico.
#[tokio::test]
async fn upgrades_keep_haproxy_running_and_fail_no_request() {
    use crate::websocket::{handshake, round_trip};
    let m = manifests(0).await;
    chat(&m).await;
    let p = Portico::start_haproxy(m.path(), &["--access-log=off"]).await;
    p.wait_route(HOST, "/", 200, "web").await;
    let mut ws = TcpStream::connect(p.http).await.unwrap();
    handshake(&mut ws, "ws.test", "/chat").await.unwrap();
    let state = p.state_dir();
    let before = haproxy_processes(&state);
    assert!(
        before.len() == 1 && !before[0].1.is_empty(),
        "one master with its workers: {before:?}"
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let kept = keep_alive(p.http, stop.clone());
    let tls = https_new_connections(p.https, HOST, stop.clone());
    let fresh = NewConnections::start(p.http, HOST);
    let mut pid = p.pid().unwrap();
    let mut guards = vec![];
    for i in 1..=10 {
        let new = upgrade(pid, &state)
            .await
            .unwrap_or_else(|e| panic!("upgrade {i}: {e}"));
        guards.push(KillOnDrop(new));
        until_gone(pid, "the old Portico").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(haproxy_processes(&state), before, "after upgrade {i}");
        let text = format!("after upgrade {i}");
        let echoed = round_trip(&mut ws, &text).await;
        assert_eq!(echoed, Some(format!("echo: {text}")), "the WebSocket");
        pid = new;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = fresh.finish().await;
    let (kept, tls) = (kept.await.unwrap(), tls.await.unwrap());
    eprintln!(
        "10 upgrades with haproxy: {} new-connection, {} keep-alive, {} HTTPS requests answered",
        seen.ok, kept.0, tls.0
    );
    assert!(seen.failed.is_empty() && seen.refused == 0, "{seen:?}");
    assert!(kept.1.is_empty(), "keep-alive failures: {:?}", kept.1);
    assert!(tls.1.is_empty(), "HTTPS failures: {:?}", tls.1);
    assert!(seen.ok > 0 && kept.0 > 0 && tls.0 > 0);
    // The WebSocket would hold the SIGTERM below for --shutdown-timeout.
    drop(ws);

    // A change after the upgrades: the adopted haproxy serves it (reloaded, same master).
    let created = "2026-01-01T00:00:00Z";
    let rules = [("after.test", "/", "Prefix", "web", "80")];
    m.write("after.yaml", &ingress("hot", "after", created, &rules));
    p.wait_route("after.test", "/", 200, "web").await;
    let after = haproxy_processes(&state);
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].0, before[0].0, "the same master");

    // A plain SIGTERM stops haproxy with Portico.
    let master = before[0].0;
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    until_gone(pid, "Portico after SIGTERM").await;
    until_gone(master, "haproxy after Portico's SIGTERM").await;
}

/// haproxy outlives a Portico that hands over, but not one killed with SIGKILL: its guard
/// (waiting for the state directory's lock) kills the master once no Portico holds it.
#[tokio::test]
async fn a_portico_killed_with_sigkill_takes_its_haproxy_with_it() {
    let m = manifests(0).await;
    let p = Portico::start_haproxy(m.path(), &["--access-log=off"]).await;
    p.wait_route(HOST, "/", 200, "web").await;
    let running = haproxy_processes(&p.state_dir());
    assert_eq!(running.len(), 1, "{running:?}");
    let pid = p.pid().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    until_gone(running[0].0, "haproxy's master after Portico's SIGKILL").await;
    for worker in &running[0].1 {
        until_gone(*worker, "a haproxy worker after Portico's SIGKILL").await;
    }
}
