//! The nginx master this bench starts (in the foreground, `daemon off`): config check, start,
//! reload by SIGHUP to its PID, memory of master and workers, stop.

use crate::process;
use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

const CHECK_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug)]
pub struct Nginx {
    child: Child,
    pub pid: u32,
}

/// The binary and the files of one nginx instance.
#[derive(Debug, Clone)]
pub struct Files {
    pub bin: PathBuf,
    pub conf: PathBuf,
    pub error_log: PathBuf,
}

impl Files {
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("-c").arg(&self.conf).arg("-e").arg(&self.error_log);
        cmd.stdin(Stdio::null()).kill_on_drop(true);
        cmd
    }

    /// Times `nginx -t`; fails if the config does not pass.
    pub async fn check(&self) -> anyhow::Result<Duration> {
        let start = Instant::now();
        let run = self.command().arg("-t").arg("-q").output();
        let out = tokio::time::timeout(CHECK_TIMEOUT, run)
            .await
            .context("nginx -t took longer than 2 minutes")?
            .with_context(|| format!("running {}", self.bin.display()))?;
        let took = start.elapsed();
        if !out.status.success() {
            bail!(
                "nginx -t failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(took)
    }

    pub fn start(&self) -> anyhow::Result<Nginx> {
        let child = self.command().stdout(Stdio::null()).spawn();
        let child = child.with_context(|| format!("starting {}", self.bin.display()))?;
        let pid = child.id().context("nginx exited at once")?;
        Ok(Nginx { child, pid })
    }
}

impl Nginx {
    pub async fn reload(&self) -> anyhow::Result<()> {
        Ok(process::signal(self.pid, "HUP").await?)
    }

    /// VmRSS of the master and its workers, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let workers = process::children(self.pid);
        std::iter::once(self.pid)
            .chain(workers)
            .filter_map(process::rss_kib)
            .sum()
    }

    /// SIGTERM (fast shutdown; the workers exit with the master), SIGKILL after 10 s.
    pub async fn stop(mut self) {
        process::stop(&mut self.child).await;
    }
}

/// A free port on 127.0.0.1 for nginx, which cannot report a kernel-chosen one.
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

pub fn files(bin: &Path, dir: &Path) -> Files {
    Files {
        bin: bin.to_owned(),
        conf: dir.join("nginx.conf"),
        error_log: dir.join("error.log"),
    }
}
