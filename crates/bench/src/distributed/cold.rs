//! An agent's cold start: agent B is stopped and started again, timed from spawn to `/readyz`
//! 200 and the newest changed route served; first with its cache deleted (all from etcd), then
//! with etcd stopped (all from its cache).

use super::Cluster;
use super::node::{self, Env};
use crate::http::Http;
use anyhow::{Context, bail};
use std::path::Path;
use std::time::{Duration, Instant};

const CACHE_TIMEOUT: Duration = Duration::from_secs(60);

pub async fn from_etcd(
    c: &mut Cluster,
    env: Env<'_>,
    http: &Http,
    route: (&str, &str),
    times: usize,
) -> anyhow::Result<Vec<Option<Duration>>> {
    let mut out = Vec::new();
    for _ in 0..times {
        out.push(restart_b(c, env, http, route, true).await?);
    }
    Ok(out)
}

/// Stops etcd first (it stays stopped).
pub async fn from_cache(
    c: &mut Cluster,
    env: Env<'_>,
    http: &Http,
    route: (&str, &str),
    times: usize,
) -> anyhow::Result<Vec<Option<Duration>>> {
    wait_for_cache(&c.specs[1].cache()).await?;
    c.etcd.stop().await;
    let mut out = Vec::new();
    for _ in 0..times {
        out.push(restart_b(c, env, http, route, false).await?);
    }
    Ok(out)
}

/// The agent writes its cache after it serves a new state (to a temporary file, then renamed):
/// waits until the file is there and no write is under way.
async fn wait_for_cache(cache: &Path) -> anyhow::Result<()> {
    let deadline = Instant::now() + CACHE_TIMEOUT;
    let dir = cache.parent().context("the cache has no directory")?;
    while Instant::now() < deadline {
        let writing = std::fs::read_dir(dir)?
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().ends_with(".tmp"));
        if cache.exists() && !writing {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!(
        "agent B wrote no cache at {} within {CACHE_TIMEOUT:?}",
        cache.display()
    )
}

async fn restart_b(
    c: &mut Cluster,
    env: Env<'_>,
    http: &Http,
    route: (&str, &str),
    drop_cache: bool,
) -> anyhow::Result<Option<Duration>> {
    let old = c.agents.pop().context("agent B is not running")?;
    old.stop().await;
    let spec = c.specs[1].clone();
    if drop_cache {
        match std::fs::remove_file(spec.cache()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
    }
    let started = Instant::now();
    let agent = node::agent(env, &spec).await?;
    let deadline = started + node::READY_TIMEOUT;
    let served = match agent.wait_ready(http, deadline).await {
        Ok(()) => agent.wait_route(http, route, deadline).await,
        Err(e) => Err(e),
    };
    let took = started.elapsed();
    c.agents.push(agent);
    if let Err(e) = &served {
        eprintln!("distributed:   cold start failed: {e:#}");
    }
    Ok(served.is_ok().then_some(took))
}
