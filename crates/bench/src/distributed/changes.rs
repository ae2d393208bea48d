//! The timed changes, each observed on both agents at once: one Ingress path moved (like
//! `scale`), one Service's endpoints moved to a marker backend. Each file is replaced
//! atomically; a change is timed from the rename to the first answer on each agent that shows
//! it. etcd's WAL counter is read before the rename and after a short settle, so that the
//! agents' feedback for the change is counted too.

use super::etcd::{Etcd, Metrics};
use crate::generate::{self, Layout, Route, Staged};
use crate::http::Http;
use crate::plan::{EndpointChange, IngressChange};
use crate::poll::observed_after;
use anyhow::{Context, bail};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

/// After this many changes in a row that some agent never served, the rest are skipped.
const GIVE_UP_AFTER: usize = 3;
/// Time after both agents serve a change for the agents' feedback to reach etcd.
const SETTLE: Duration = Duration::from_millis(250);

/// Where the changes are made and observed.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub http: &'a Http,
    pub agents: [SocketAddr; 2],
    pub dir: &'a Path,
    pub layout: &'a Layout,
    pub etcd: &'a Etcd,
    pub budget: Duration,
}

/// One timed change.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// The rename, on the clock of the processes' logs.
    pub wall: SystemTime,
    pub start: Instant,
    /// After both were served and the settle time.
    pub end: Instant,
    /// Rename to served, per agent; `None` if never within the timeout.
    pub served: [Option<Duration>; 2],
    /// What etcd's WAL wrote from just before the rename to `end`.
    pub wal_bytes: u64,
}

impl Sample {
    /// When the later agent served it.
    pub fn both(&self) -> Option<Duration> {
        Some(self.served[0]?.max(self.served[1]?))
    }
}

pub async fn ingresses(t: Target<'_>, changes: &[IngressChange]) -> anyhow::Result<Vec<Sample>> {
    let started = Instant::now();
    let mut out = Vec::new();
    for c in changes {
        out.push(ingress(t, c).await?);
        if over(&out, started, t.budget, changes.len()) {
            break;
        }
    }
    Ok(out)
}

pub async fn endpoints(t: Target<'_>, changes: &[EndpointChange]) -> anyhow::Result<Vec<Sample>> {
    let started = Instant::now();
    let mut out = Vec::new();
    for (n, c) in changes.iter().enumerate() {
        out.push(endpoint(t, c, n).await?);
        if over(&out, started, t.budget, changes.len()) {
            break;
        }
    }
    Ok(out)
}

/// Whether to stop: out of time, or several changes in a row were never served.
fn over(done: &[Sample], started: Instant, budget: Duration, planned: usize) -> bool {
    let n = done.len();
    if n.is_multiple_of(10) {
        let last = done.last().and_then(Sample::both);
        eprintln!("distributed:   {n}/{planned} changes, the last served on both after {last:?}");
    }
    let stuck =
        n >= GIVE_UP_AFTER && (done.iter().rev().take(GIVE_UP_AFTER)).all(|s| s.both().is_none());
    let late = started.elapsed() > budget && n < planned;
    if late {
        eprintln!("distributed:   phase budget of {budget:?} spent after {n} changes");
    }
    stuck || late
}

async fn ingress(t: Target<'_>, c: &IngressChange) -> anyhow::Result<Sample> {
    let host = t.layout.route(c.route).host;
    for agent in t.agents {
        let status = t.http.status(agent, &host, &c.new_path).await;
        if status != Some(404) {
            bail!(
                "{agent}: {host}{} answered {status:?} before it was added",
                c.new_path
            );
        }
    }
    let text = generate::ingress_file_yaml(t.layout, c.ingress, Some((c.route, &c.new_path)));
    let staged = Staged::write(&generate::ingress_file(t.dir, t.layout, c.ingress), &text)?;
    let served = |agent: SocketAddr| {
        let (host, path) = (host.clone(), c.new_path.clone());
        async move || t.http.status(agent, &host, &path).await == Some(200)
    };
    timed(t, staged, [served(t.agents[0]), served(t.agents[1])]).await
}

/// Renames `staged` into place and times `checks` (one per agent) from that moment.
async fn timed(
    t: Target<'_>,
    staged: Staged,
    checks: [impl AsyncFnMut() -> bool; 2],
) -> anyhow::Result<Sample> {
    let before = t.etcd.metrics(t.http).await?;
    let [a, b] = checks;
    let (wall, start) = (SystemTime::now(), Instant::now());
    staged.commit()?;
    let (a, b) = tokio::join!(observed_after(start, a), observed_after(start, b));
    tokio::time::sleep(SETTLE).await;
    let after: Metrics = t.etcd.metrics(t.http).await?;
    Ok(Sample {
        wall,
        start,
        end: Instant::now(),
        served: [a, b],
        wal_bytes: after.wal_since(&before),
    })
}

async fn endpoint(t: Target<'_>, c: &EndpointChange, n: usize) -> anyhow::Result<Sample> {
    let pod = format!("marker-{n}");
    let marker = portico_echo::spawn(([127, 0, 0, 1], 0).into(), "marker", &pod)
        .await
        .context("starting a marker backend")?;
    let file = generate::service_file(t.dir, t.layout, c.service);
    let route = t.layout.route(c.route);
    let moved = generate::service_file_yaml(t.layout, c.service, Some(marker.port()));
    let staged = Staged::write(&file, &moved)?;
    let by_marker = |agent: SocketAddr| {
        let (route, pod) = (route.clone(), pod.clone());
        async move || answered_by(t.http, agent, &route, &pod).await == Some(true)
    };
    let sample = timed(t, staged, [by_marker(t.agents[0]), by_marker(t.agents[1])]).await?;
    Staged::write(
        &file,
        &generate::service_file_yaml(t.layout, c.service, None),
    )?
    .commit()?;
    for agent in t.agents {
        let restored = async || answered_by(t.http, agent, &route, &pod).await == Some(false);
        if observed_after(Instant::now(), restored).await.is_none() {
            bail!(
                "{agent}: {}{} not back on its own backends",
                route.host,
                route.path
            );
        }
    }
    Ok(sample)
}

/// Whether a 200 answer for `route` came from `pod`; `None` for anything but a 200.
async fn answered_by(http: &Http, agent: SocketAddr, route: &Route, pod: &str) -> Option<bool> {
    let reply = http.get(agent, &route.host, &route.path).await.ok()?;
    (reply.status == 200).then(|| reply.pod().as_deref() == Some(pod))
}
