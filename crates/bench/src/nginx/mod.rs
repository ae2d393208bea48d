//! The nginx side of the comparison: the same routes as one nginx.conf, its check time, its
//! start, and the cost of serving a changed location through a reload, under the same light
//! traffic as Portico.

mod process;
mod render;

use crate::generate::{Layout, Staged};
use crate::http::Http;
use crate::plan::Plan;
use crate::poll::{POLL, observed_after};
use crate::report::NginxResults;
use crate::traffic;
use anyhow::{Context, bail};
use process::{Files, Nginx};
use render::Conf;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// How the comparison runs.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    pub bin: &'a Path,
    pub dir: &'a Path,
    pub reloads: usize,
    pub rate: u32,
    /// The generated manifests (the TLS certificates' PEM files are there).
    pub manifests: &'a Path,
}

pub async fn compare(
    o: Options<'_>,
    layout: &Layout,
    plan: &Plan,
    http: &Http,
) -> anyhow::Result<NginxResults> {
    std::fs::create_dir_all(o.dir)?;
    let files = process::files(o.bin, o.dir);
    let port = process::free_port()?;
    let tls_port = process::free_port()?;
    let mut renamed = BTreeMap::new();
    let conf = |renamed: &BTreeMap<usize, String>| {
        render::render(&Conf {
            layout,
            port,
            dir: o.dir,
            renamed,
            tls: (tls_port, o.manifests),
        })
    };
    std::fs::write(&files.conf, conf(&renamed))?;
    let check = checks(&files).await?;
    let to: SocketAddr = ([127, 0, 0, 1], port).into();
    let (nginx, start) = start(&files, layout, to, http).await?;
    let routes = crate::run::traffic_routes(layout, &plan.traffic);
    let load = traffic::start(http.clone(), to, routes, o.rate);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_kib = nginx.rss_kib();
    let mut reloads = Vec::new();
    for (n, c) in plan.ingress_changes.iter().take(o.reloads).enumerate() {
        let new_path = format!("/nginx{n}");
        renamed.insert(c.route, new_path.clone());
        let host = layout.route(c.route).host;
        let text = conf(&renamed);
        reloads.push(reload(&nginx, &files, &text, to, &host, &new_path, http).await?);
    }
    let traffic = load.stop().await;
    nginx.stop().await;
    Ok(NginxResults {
        check,
        start,
        rss_kib,
        reloads,
        traffic,
    })
}

/// `nginx -t` three times; the durations, sorted.
async fn checks(files: &Files) -> anyhow::Result<Vec<Duration>> {
    let mut out = Vec::new();
    for _ in 0..3 {
        out.push(files.check().await?);
    }
    out.sort_unstable();
    Ok(out)
}

/// Starts nginx; the time until the first route is served.
async fn start(
    files: &Files,
    layout: &Layout,
    to: SocketAddr,
    http: &Http,
) -> anyhow::Result<(Nginx, Duration)> {
    let route = layout.route(0);
    let started = Instant::now();
    let nginx = files.start()?;
    let served = async || http.status(to, &route.host, &route.path).await == Some(200);
    match observed_after(started, served).await {
        Some(took) => Ok((nginx, took)),
        None => {
            nginx.stop().await;
            bail!(
                "nginx did not serve {}{} (see {})",
                route.host,
                route.path,
                files.error_log.display()
            )
        }
    }
}

/// Replaces the config, sends SIGHUP; the time from the rename until `host``path` is served.
async fn reload(
    nginx: &Nginx,
    files: &Files,
    text: &str,
    to: SocketAddr,
    host: &str,
    path: &str,
    http: &Http,
) -> anyhow::Result<Option<Duration>> {
    let staged = Staged::write(&files.conf, text)?;
    let start = Instant::now();
    staged.commit()?;
    nginx.reload().await.context("reloading nginx")?;
    let served = async || http.status(to, host, path).await == Some(200);
    let took = observed_after(start, served).await;
    // Let the old worker finish before the next reload, as an operator would.
    tokio::time::sleep(POLL * 100).await;
    Ok(took)
}
