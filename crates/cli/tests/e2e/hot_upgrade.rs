//! Zero-downtime starts and upgrades of `portico run`: no answer from an empty route table,
//! and (SIGUSR2, `portico upgrade`) the listening sockets handed to the new process.

use crate::support::*;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HOST: &str = "hot.test";

/// `hot.test` → Service `web`, with `extra` more Ingresses (hosts `extra-<i>.test`) so that
/// loading takes a while.
async fn manifests(extra: usize) -> Manifests {
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
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (flag, counts, host) = (stop.clone(), seen.clone(), host.to_owned());
        let task = tokio::spawn(async move {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let outcome = one_request(addr, &host).await;
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

async fn one_request(addr: SocketAddr, host: &str) -> Outcome {
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
    if status.starts_with("HTTP/1.1 200") && text.contains("\"service\":\"web\"") {
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
    while clients.iter().map(NewConnections::ok).sum::<usize>() < 40 {
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
