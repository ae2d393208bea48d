//! One etcd member on loopback (Debian's etcd-server): its data directory under the work
//! directory (on disk, so every commit pays a real fsync), ports chosen by the kernel, stopped
//! by PID; and what its `/metrics` say about what it wrote.

use super::pids::Pids;
use crate::http::Http;
use crate::process;
use anyhow::{Context, bail};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

const HEALTHY_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub struct Etcd {
    child: Option<Child>,
    pub pid: u32,
    pub client: SocketAddr,
}

impl Etcd {
    /// Starts a single-member cluster with its data under `dir`; returns once it is healthy.
    pub async fn start(bin: &Path, dir: &Path, pids: &Pids, http: &Http) -> anyhow::Result<Self> {
        let (client, peer) = (free_port()?, free_port()?);
        let log = std::fs::File::create(dir.join("etcd.log"))?;
        let child = command(bin, &data_dir(dir), client, peer)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {} (is etcd-server installed?)", bin.display()))?;
        let pid = child.id().context("etcd exited at once")?;
        pids.record(pid)?;
        let client = SocketAddr::from(([127, 0, 0, 1], client));
        let etcd = Etcd {
            child: Some(child),
            pid,
            client,
        };
        etcd.wait_healthy(http).await?;
        Ok(etcd)
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.client)
    }

    async fn wait_healthy(&self, http: &Http) -> anyhow::Result<()> {
        let deadline = Instant::now() + HEALTHY_TIMEOUT;
        while Instant::now() < deadline {
            if http.status(self.client, "127.0.0.1", "/health").await == Some(200) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("etcd was not healthy within {HEALTHY_TIMEOUT:?}")
    }

    /// Its counters now.
    pub async fn metrics(&self, http: &Http) -> anyhow::Result<Metrics> {
        let reply = http.get(self.client, "127.0.0.1", "/metrics").await;
        let reply = reply.map_err(anyhow::Error::msg)?;
        Ok(Metrics::parse(&String::from_utf8_lossy(&reply.body)))
    }

    /// SIGTERM (SIGKILL after 10 s), by PID.
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            process::stop(&mut child).await;
        }
    }
}

fn command(bin: &Path, data: &Path, client: u16, peer: u16) -> Command {
    let client = format!("http://127.0.0.1:{client}");
    let peer = format!("http://127.0.0.1:{peer}");
    let mut c = Command::new(bin);
    c.arg("--name=bench")
        .arg(format!("--data-dir={}", data.display()))
        .arg(format!("--listen-client-urls={client}"))
        .arg(format!("--advertise-client-urls={client}"))
        .arg(format!("--listen-peer-urls={peer}"))
        .arg(format!("--initial-advertise-peer-urls={peer}"))
        .arg(format!("--initial-cluster=bench={peer}"))
        .args(["--logger=zap", "--log-level=warn", "--log-outputs=stderr"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true);
    c
}

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// etcd's own counters: bytes its write-ahead log wrote, its fsyncs, its database file.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Metrics {
    pub wal_bytes: f64,
    pub fsync_seconds: f64,
    pub fsyncs: f64,
    pub db_bytes: f64,
}

impl Metrics {
    /// From Prometheus text; a missing counter stays 0.
    pub fn parse(text: &str) -> Metrics {
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
                .unwrap_or(0.0)
        };
        Metrics {
            wal_bytes: value("etcd_disk_wal_write_bytes_total"),
            fsync_seconds: value("etcd_disk_wal_fsync_duration_seconds_sum"),
            fsyncs: value("etcd_disk_wal_fsync_duration_seconds_count"),
            db_bytes: value("etcd_mvcc_db_total_size_in_bytes"),
        }
    }

    /// WAL bytes written since `before`.
    pub fn wal_since(&self, before: &Metrics) -> u64 {
        (self.wal_bytes - before.wal_bytes).max(0.0) as u64
    }
}

/// The data directory of the member started by [`Etcd::start`] under `dir`.
pub fn data_dir(dir: &Path) -> PathBuf {
    dir.join("etcd-data")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_by_exact_name() {
        let text = "# HELP x\netcd_disk_wal_write_bytes_total 1744\n\
                    etcd_disk_wal_fsync_duration_seconds_sum 0.5\n\
                    etcd_disk_wal_fsync_duration_seconds_count 8\n\
                    etcd_debugging_mvcc_db_total_size_in_bytes 1\n\
                    etcd_mvcc_db_total_size_in_bytes 20480\n";
        let m = Metrics::parse(text);
        assert_eq!((m.wal_bytes, m.fsyncs, m.db_bytes), (1744.0, 8.0, 20480.0));
        assert_eq!(m.fsync_seconds, 0.5);
    }
}
