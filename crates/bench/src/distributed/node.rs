//! `portico controller` and `portico agent` processes on ports chosen by the kernel: spawn,
//! the address line they print, readiness, stop. Each logs at `info` to its own file (appended
//! to when an agent is started again), which [`super::logs`] reads.

use super::pids::Pids;
use crate::http::Http;
use crate::process;
use anyhow::{Context, bail};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const BANNER_TIMEOUT: Duration = Duration::from_secs(60);
pub const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// What a started process needs: the binary, etcd, where PIDs go.
#[derive(Debug, Clone, Copy)]
pub struct Env<'a> {
    pub bin: &'a Path,
    pub store: &'a str,
    pub pids: &'a Pids,
}

#[derive(Debug)]
pub struct Node {
    child: Child,
    pub pid: u32,
    pub admin: SocketAddr,
    /// The HTTP listener (agents only).
    pub http: Option<SocketAddr>,
}

/// An agent's name, loopback address and state directory (its cache lives there).
#[derive(Debug, Clone)]
pub struct AgentSpec {
    pub name: String,
    pub ip: Ipv4Addr,
    pub state: PathBuf,
    pub log: PathBuf,
}

impl AgentSpec {
    pub fn cache(&self) -> PathBuf {
        self.state
            .join("agent")
            .join(format!("{}.cache", self.name))
    }
}

/// `portico controller -f manifests` on etcd; returns once its admin address is printed.
pub async fn controller(env: Env<'_>, manifests: &Path, log: &Path) -> anyhow::Result<Node> {
    let mut command = Command::new(env.bin);
    command
        .arg("controller")
        .arg("-f")
        .arg(manifests)
        .arg(format!("--store={}", env.store))
        .args(["--admin-listen=127.0.0.1:0", "--publish-address=127.0.0.1"])
        .arg("--identity=bench");
    let (child, first) = spawn(command, log, env.pids).await?;
    let admin = first.rsplit(' ').next().and_then(|a| a.trim().parse().ok());
    let admin = admin.with_context(|| format!("unexpected first line: {first}"))?;
    node(child, admin, None)
}

/// `portico agent` for `spec`; returns once its addresses are printed.
pub async fn agent(env: Env<'_>, spec: &AgentSpec) -> anyhow::Result<Node> {
    let ip = spec.ip;
    let mut command = Command::new(env.bin);
    command
        .arg("agent")
        .arg(format!("--node={}", spec.name))
        .arg(format!("--store={}", env.store))
        .arg(format!("--http-listen={ip}:0"))
        .arg(format!("--https-listen={ip}:0"))
        .arg(format!("--admin-listen={ip}:0"))
        .arg("--state-dir")
        .arg(&spec.state);
    let (child, first) = spawn(command, &spec.log, env.pids).await?;
    let (http, admin) =
        parse_agent_banner(&first).with_context(|| format!("unexpected first line: {first}"))?;
    node(child, admin, Some(http))
}

fn node(child: Child, admin: SocketAddr, http: Option<SocketAddr>) -> anyhow::Result<Node> {
    let pid = child.id().context("portico exited")?;
    Ok(Node {
        child,
        pid,
        admin,
        http,
    })
}

impl Node {
    /// Polls `/readyz` until 200.
    pub async fn wait_ready(&self, http: &Http, deadline: Instant) -> anyhow::Result<()> {
        while Instant::now() < deadline {
            if http.status(self.admin, "localhost", "/readyz").await == Some(200) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        bail!("pid {} was not ready in time", self.pid)
    }

    /// Polls `host``path` on the HTTP listener until 200.
    pub async fn wait_route(
        &self,
        http: &Http,
        route: (&str, &str),
        deadline: Instant,
    ) -> anyhow::Result<()> {
        let to = self.http.context("not an agent")?;
        while Instant::now() < deadline {
            if http.status(to, route.0, route.1).await == Some(200) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        bail!("pid {} never served {}{}", self.pid, route.0, route.1)
    }

    pub async fn stop(mut self) {
        process::stop(&mut self.child).await;
    }
}

async fn spawn(mut command: Command, log: &Path, pids: &Pids) -> anyhow::Result<(Child, String)> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let mut child = command
        .env("PORTICO_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .context("starting portico")?;
    pids.record(child.id().context("portico exited at once")?)?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(BANNER_TIMEOUT, lines.next_line())
        .await
        .context("portico printed no address line in time")??
        .context("portico exited before printing its addresses")?;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, first))
}

/// `portico: agent NAME, serving HTTP on A, HTTPS on B and the admin API on C` → (A, C).
fn parse_agent_banner(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let (_, rest) = line.split_once(", serving HTTP on ")?;
    let (http, rest) = rest.split_once(", HTTPS on ")?;
    let (_, admin) = rest.split_once(" and the admin API on ")?;
    Some((http.trim().parse().ok()?, admin.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_banner_names_its_http_and_admin_addresses() {
        let line = "portico: agent node-a, serving HTTP on 127.0.0.2:4001, HTTPS on \
                    127.0.0.2:4003 and the admin API on 127.0.0.2:4002";
        let (http, admin) = parse_agent_banner(line).unwrap();
        assert_eq!((http.port(), admin.port()), (4001, 4002));
    }
}
