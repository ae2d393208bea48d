//! One `portico run` process (manifest files, or Kubernetes mode) on ports chosen by the
//! kernel: start, readiness, the Ingresses it lists, stop. Its log (at `warn`) goes to a file beside the manifests.

use crate::http::Http;
use crate::process;
use anyhow::{Context, bail};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const BANNER_TIMEOUT: Duration = Duration::from_secs(60);
const READY_TIMEOUT: Duration = Duration::from_secs(300);
const READY_POLL: Duration = Duration::from_millis(2);

#[derive(Debug)]
pub struct Portico {
    child: Child,
    pub pid: u32,
    pub http: SocketAddr,
    pub admin: SocketAddr,
}

impl Portico {
    /// Spawns `bin run -f dir` and returns once `/readyz` answers 200, with the time from
    /// spawn to that answer.
    pub async fn start(
        bin: &Path,
        dir: &Path,
        log: &Path,
        http: &Http,
    ) -> anyhow::Result<(Self, Duration)> {
        Self::start_with(bin, dir, log, http, &[]).await
    }

    /// Like [`Portico::start`] with more arguments, which may override the listen addresses
    /// (the last occurrence of a flag wins).
    pub async fn start_with(
        bin: &Path,
        dir: &Path,
        log: &Path,
        http: &Http,
        extra: &[String],
    ) -> anyhow::Result<(Self, Duration)> {
        Self::start_limited(bin, dir, log, http, extra, None).await
    }

    /// Like [`Portico::start_with`], run by `prlimit` with a hard and soft open-file limit of
    /// `nofile` when given.
    pub async fn start_limited(
        bin: &Path,
        dir: &Path,
        log: &Path,
        http: &Http,
        extra: &[String],
        nofile: Option<u64>,
    ) -> anyhow::Result<(Self, Duration)> {
        let source = [OsString::from("-f"), dir.as_os_str().to_owned()];
        let launch = Launch { bin, nofile };
        Self::start_source(launch, &source, log, http, extra).await
    }

    /// Spawns `bin run --kubernetes --kubeconfig KUBECONFIG` and returns once `/readyz`
    /// answers 200 (every kind listed and served), with the time from spawn to that answer.
    pub async fn start_kube(
        bin: &Path,
        kubeconfig: &Path,
        log: &Path,
        http: &Http,
    ) -> anyhow::Result<(Self, Duration)> {
        let source = [
            OsString::from("--kubernetes"),
            OsString::from("--kubeconfig"),
            kubeconfig.as_os_str().to_owned(),
            OsString::from("--identity"),
            OsString::from("portico-bench"),
        ];
        let launch = Launch { bin, nofile: None };
        Self::start_source(launch, &source, log, http, &[]).await
    }

    async fn start_source(
        launch: Launch<'_>,
        source: &[OsString],
        log: &Path,
        http: &Http,
        extra: &[String],
    ) -> anyhow::Result<(Self, Duration)> {
        let started = Instant::now();
        let mut child = spawn(launch, source, log, extra)?;
        let pid = child.id().context("portico exited at once")?;
        let (http_addr, admin) = banner(&mut child).await?;
        let portico = Portico {
            child,
            pid,
            http: http_addr,
            admin,
        };
        portico.wait_ready(http).await?;
        Ok((portico, started.elapsed()))
    }

    async fn wait_ready(&self, http: &Http) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if http.status(self.admin, "localhost", "/readyz").await == Some(200) {
                return Ok(());
            }
            tokio::time::sleep(READY_POLL).await;
        }
        bail!("portico was not ready within {READY_TIMEOUT:?}")
    }

    /// How many Ingresses `GET /api/v1/ingresses` lists (its `X-Total-Count`: the list
    /// itself is paged).
    pub async fn ingresses(&self, http: &Http) -> anyhow::Result<usize> {
        self.listed(http, "ingresses").await
    }

    /// How many HTTPRoutes the admin API lists.
    pub async fn http_routes(&self, http: &Http) -> anyhow::Result<usize> {
        self.listed(http, "httproutes").await
    }

    /// How many objects the admin API lists under `/api/v1/{kind}`.
    async fn listed(&self, http: &Http, kind: &str) -> anyhow::Result<usize> {
        let path = format!("/api/v1/{kind}?limit=1");
        let reply = http.get(self.admin, "localhost", &path).await;
        let reply = reply.map_err(anyhow::Error::msg)?;
        reply
            .total
            .with_context(|| format!("{path} gave no X-Total-Count"))
    }

    pub async fn stop(mut self) {
        process::stop(&mut self.child).await;
    }
}

/// The binary, and the open-file limit to run it under.
#[derive(Debug, Clone, Copy)]
struct Launch<'a> {
    bin: &'a Path,
    nofile: Option<u64>,
}

fn spawn(
    launch: Launch<'_>,
    source: &[OsString],
    log: &Path,
    extra: &[String],
) -> anyhow::Result<Child> {
    let bin = launch.bin;
    let log = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    // Listen addresses in `extra` replace the kernel-chosen ones (haproxy needs fixed ports).
    let own = |flag: &str| extra.iter().any(|a| a.starts_with(flag));
    let mut listen = Vec::new();
    for flag in ["--http-listen", "--https-listen", "--admin-listen"] {
        if !own(flag) {
            listen.extend([flag, "127.0.0.1:0"]);
        }
    }
    let mut command = match launch.nofile {
        Some(n) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--nofile={n}:{n}")).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    command
        .arg("run")
        .args(source)
        .args(listen)
        .args(["--log", "warn"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

/// Reads `portico: serving HTTP on ADDR, HTTPS on ADDR and the admin API on ADDR`, then
/// drains stdout.
async fn banner(child: &mut Child) -> anyhow::Result<(SocketAddr, SocketAddr)> {
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(BANNER_TIMEOUT, lines.next_line())
        .await
        .context("portico printed no address line in time")??
        .context("portico exited before printing its addresses")?;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    parse_banner(&first).with_context(|| format!("unexpected first line: {first}"))
}

fn parse_banner(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = line.strip_prefix("portico: serving HTTP on ")?;
    let (http, rest) = rest.split_once(", HTTPS on ")?;
    let (_https, admin) = rest.split_once(" and the admin API on ")?;
    Some((http.trim().parse().ok()?, admin.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banner_names_both_addresses() {
        let line = "portico: serving HTTP on 127.0.0.1:4001, HTTPS on 127.0.0.1:4003 and the \
                    admin API on 127.0.0.1:4002";
        let (http, admin) = parse_banner(line).unwrap();
        assert_eq!((http.port(), admin.port()), (4001, 4002));
    }
}
