//! Resident memory: a second after ready, of an idle Portico, and after everything is deleted.

use super::portico::Portico;
use crate::http::Http;
use crate::process::{hwm_kib, rss_kib};
use anyhow::{Context, bail};
use std::path::Path;
use std::time::{Duration, Instant};

const SETTLE: Duration = Duration::from_secs(1);
const AFTER_EMPTY: Duration = Duration::from_secs(2);
const EMPTY_TIMEOUT: Duration = Duration::from_secs(300);

/// VmRSS and VmHWM (KiB) one second from now.
pub async fn settled(pid: u32) -> anyhow::Result<(u64, u64)> {
    tokio::time::sleep(SETTLE).await;
    let rss = rss_kib(pid).context("no VmRSS: did portico exit?")?;
    Ok((rss, hwm_kib(pid).unwrap_or(rss)))
}

/// RSS of a fresh Portico serving an empty directory, measured like the big one.
pub async fn idle(bin: &Path, dir: &Path, http: &Http) -> anyhow::Result<u64> {
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty)?;
    let (portico, _) = Portico::start(bin, &empty, &dir.join("portico-idle.log"), http).await?;
    let rss = settled(portico.pid).await;
    portico.stop().await;
    Ok(rss?.0)
}

/// Deletes every generated file (and in Kubernetes mode every object), waits until no Ingress is listed, then 2 s more; the RSS.
pub async fn after_deletion(
    portico: &Portico,
    manifests: &Path,
    http: &Http,
    api: Option<&super::kube::FakeApi>,
) -> anyhow::Result<u64> {
    for sub in ["ingresses", "services", "httproutes", "gateway"] {
        let dir = manifests.join(sub);
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
    }
    if let Some(api) = api {
        api.delete_all().await?;
    }
    let deadline = Instant::now() + EMPTY_TIMEOUT;
    while portico.ingresses(http).await? > 0 {
        if Instant::now() > deadline {
            bail!("portico still lists Ingresses {EMPTY_TIMEOUT:?} after their files were deleted");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(AFTER_EMPTY).await;
    rss_kib(portico.pid).context("no VmRSS: did portico exit?")
}

/// How long until `pid` spends less than a fifth of a core for a whole second (checked every
/// second, for 10 minutes at most); `None` when it never does.
pub async fn quiet(pid: u32) -> Option<std::time::Duration> {
    let started = Instant::now();
    let mut last = crate::process::cpu_time(pid)?;
    while started.elapsed() < Duration::from_secs(600) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = crate::process::cpu_time(pid)?;
        if now.saturating_sub(last) < Duration::from_millis(200) {
            return Some(started.elapsed());
        }
        last = now;
    }
    None
}
