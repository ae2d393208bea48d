//! The timed changes: one Ingress path moved (c), one Service's endpoints moved to a marker
//! backend (d), one HTTPRoute rule's path moved. Each file is replaced atomically and timed
//! from the rename to the first answer that shows the change.

use crate::generate::gateway::{self, RouteChange};
use crate::generate::{self, Layout, Staged};
use crate::http::Http;
use crate::plan::{EndpointChange, IngressChange};
use crate::poll::observed_after;
use anyhow::{Context, bail};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// After this many changes in a row that were never served, the rest are skipped.
const GIVE_UP_AFTER: usize = 3;
const PROGRESS_EVERY: usize = 10;

/// Where the changes are made and observed, and how long a phase may take.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub http: &'a Http,
    pub proxy: SocketAddr,
    pub dir: &'a Path,
    pub layout: &'a Layout,
    pub budget: Duration,
    /// Kubernetes mode: the fake API server each changed file is applied to.
    pub api: Option<&'a super::kube::FakeApi>,
}

impl Target<'_> {
    /// Puts a staged file in place and, in Kubernetes mode, applies it; the instant the
    /// change was made (the rename, or the apply request).
    pub async fn publish(&self, staged: Staged) -> anyhow::Result<Instant> {
        let file = staged.target().to_owned();
        match self.api {
            None => {
                let start = Instant::now();
                staged.commit()?;
                Ok(start)
            }
            Some(api) => {
                staged.commit()?;
                let start = Instant::now();
                api.apply(&file).await?;
                Ok(start)
            }
        }
    }
}

/// Times the Ingress changes in turn; `None` for one not served in time.
pub async fn ingresses(
    t: Target<'_>,
    changes: &[IngressChange],
) -> anyhow::Result<Vec<Option<Duration>>> {
    series(t, changes, async |c| ingress(t, c).await).await
}

/// Times the HTTPRoute changes in turn; `None` for one not served in time.
pub async fn http_routes(
    t: Target<'_>,
    changes: &[RouteChange],
) -> anyhow::Result<Vec<Option<Duration>>> {
    series(t, changes, async |c| http_route(t, c).await).await
}

/// Makes `changes` in turn with `one`, within the phase's budget.
async fn series<C>(
    t: Target<'_>,
    changes: &[C],
    one: impl AsyncFn(&C) -> anyhow::Result<Option<Duration>>,
) -> anyhow::Result<Vec<Option<Duration>>> {
    let phase = Phase::new(t, changes.len());
    let mut out = Vec::new();
    for c in changes {
        out.push(one(c).await?);
        if phase.over(&out) {
            break;
        }
    }
    Ok(out)
}

/// Times the endpoint changes in turn; `None` for one not served in time.
pub async fn endpoints(
    t: Target<'_>,
    changes: &[EndpointChange],
) -> anyhow::Result<Vec<Option<Duration>>> {
    let numbered: Vec<(usize, &EndpointChange)> = changes.iter().enumerate().collect();
    series(t, &numbered, async |&(n, c)| endpoint(t, c, n).await).await
}

/// One series of changes: its budget, and a progress line every few changes.
struct Phase {
    started: Instant,
    budget: Duration,
    planned: usize,
}

impl Phase {
    fn new(t: Target<'_>, planned: usize) -> Self {
        let (started, budget) = (Instant::now(), t.budget);
        Phase {
            started,
            budget,
            planned,
        }
    }

    /// Whether to stop: out of time, or several changes in a row were never served.
    fn over(&self, done: &[Option<Duration>]) -> bool {
        let n = done.len();
        if n.is_multiple_of(PROGRESS_EVERY) {
            let last = done.last().copied().flatten();
            eprintln!(
                "scale:   {n}/{} changes, the last served after {last:?}",
                self.planned
            );
        }
        let stuck =
            n >= GIVE_UP_AFTER && done.iter().rev().take(GIVE_UP_AFTER).all(Option::is_none);
        let late = self.started.elapsed() > self.budget && n < self.planned;
        if late {
            eprintln!(
                "scale:   phase budget of {:?} spent after {n} changes",
                self.budget
            );
        }
        stuck || late
    }
}

async fn ingress(t: Target<'_>, c: &IngressChange) -> anyhow::Result<Option<Duration>> {
    let host = t.layout.route(c.route).host;
    let status = t.http.status(t.proxy, &host, &c.new_path).await;
    if status != Some(404) {
        bail!(
            "{host}{} answered {status:?} before it was added, not 404",
            c.new_path
        );
    }
    let text = generate::ingress_file_yaml(t.layout, c.ingress, Some((c.route, &c.new_path)));
    let staged = Staged::write(&generate::ingress_file(t.dir, t.layout, c.ingress), &text)?;
    let start = t.publish(staged).await?;
    let served = async || t.http.status(t.proxy, &host, &c.new_path).await == Some(200);
    Ok(observed_after(start, served).await)
}

async fn http_route(t: Target<'_>, c: &RouteChange) -> anyhow::Result<Option<Duration>> {
    let host = gateway::route_host(c.route);
    let status = t.http.status(t.proxy, &host, &c.new_path).await;
    if status != Some(404) {
        bail!(
            "{host}{} answered {status:?} before it was added, not 404",
            c.new_path
        );
    }
    let text = gateway::route_yaml(t.layout, c.route, Some(&c.new_path));
    let staged = Staged::write(&gateway::route_file(t.dir, c.route), &text)?;
    let start = t.publish(staged).await?;
    let served = async || t.http.status(t.proxy, &host, &c.new_path).await == Some(200);
    Ok(observed_after(start, served).await)
}

async fn endpoint(t: Target<'_>, c: &EndpointChange, n: usize) -> anyhow::Result<Option<Duration>> {
    let pod = format!("marker-{n}");
    let marker = portico_echo::spawn(([127, 0, 0, 1], 0).into(), "marker", &pod)
        .await
        .context("starting a marker backend")?;
    let file = generate::service_file(t.dir, t.layout, c.service);
    let route = t.layout.route(c.route);
    let moved = generate::service_file_yaml(t.layout, c.service, Some(marker.port()));
    let staged = Staged::write(&file, &moved)?;
    let start = t.publish(staged).await?;
    let by_marker = async || answered_by(t, &route, &pod).await == Some(true);
    let took = observed_after(start, by_marker).await;
    let restore = Staged::write(
        &file,
        &generate::service_file_yaml(t.layout, c.service, None),
    )?;
    t.publish(restore).await?;
    let restored = async || answered_by(t, &route, &pod).await == Some(false);
    if observed_after(Instant::now(), restored).await.is_none() {
        bail!(
            "{}{} still not answered by its own backends after restoring",
            route.host,
            route.path
        );
    }
    Ok(took)
}

/// Whether a 200 answer for `route` came from `pod`; `None` for anything but a 200.
async fn answered_by(t: Target<'_>, route: &generate::Route, pod: &str) -> Option<bool> {
    let reply = t.http.get(t.proxy, &route.host, &route.path).await.ok()?;
    (reply.status == 200).then(|| reply.pod().as_deref() == Some(pod))
}

/// RSS across a long series of Ingress changes: after the warm-up and at the end.
#[derive(Debug, Clone, Copy, Default)]
pub struct Drift {
    /// Changes made (each served before the next).
    pub changes: usize,
    /// Changes before the first sample.
    pub warm_up: usize,
    pub warm_rss_kib: u64,
    pub end_rss_kib: u64,
    /// Changes not served in time.
    pub timeouts: usize,
    /// Portico's CPU time (user + system) over the changes after the warm-up, including what
    /// the light traffic costs meanwhile.
    pub cpu: Duration,
}

/// Makes `count` Ingress changes in a row, each awaited until served: the changes of the
/// Ingress phase undone and redone in turn (the first `count / 10` are the warm-up). RSS is
/// sampled a second after the warm-up and a second after the last change.
pub async fn drift(
    t: Target<'_>,
    changes: &[IngressChange],
    count: usize,
    pid: u32,
) -> anyhow::Result<Drift> {
    let mut d = Drift {
        changes: 0,
        warm_up: (count / 10).max(1),
        ..Drift::default()
    };
    if changes.is_empty() {
        return Ok(d);
    }
    let started = Instant::now();
    let mut cpu_from = None;
    for n in 0..count {
        if n == d.warm_up {
            d.warm_rss_kib = super::memory::settled(pid).await?.0;
            cpu_from = crate::process::cpu_time(pid);
        }
        let c = &changes[(n / 2) % changes.len()];
        // Even: undo the change (its new path answers 404 again); odd: redo it.
        let redo = n % 2 == 1;
        let renamed = redo.then_some((c.route, c.new_path.as_str()));
        let text = generate::ingress_file_yaml(t.layout, c.ingress, renamed);
        let staged = Staged::write(&generate::ingress_file(t.dir, t.layout, c.ingress), &text)?;
        let host = t.layout.route(c.route).host;
        let want = if redo { 200 } else { 404 };
        let start = t.publish(staged).await?;
        let served = async || t.http.status(t.proxy, &host, &c.new_path).await == Some(want);
        if observed_after(start, served).await.is_none() {
            d.timeouts += 1;
        }
        d.changes += 1;
        if (n + 1).is_multiple_of(100) {
            eprintln!("scale:   {}/{count} changes", n + 1);
        }
        if started.elapsed() > t.budget * 2 {
            eprintln!("scale:   drift budget spent after {} changes", n + 1);
            break;
        }
    }
    let cpu_to = crate::process::cpu_time(pid);
    if let (Some(from), Some(to)) = (cpu_from, cpu_to) {
        d.cpu = to.saturating_sub(from);
    }
    d.end_rss_kib = super::memory::settled(pid).await?.0;
    Ok(d)
}
