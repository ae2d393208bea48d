//! The `distributed` driver: per cluster size, a single-member etcd on loopback, `portico
//! controller` on the generated manifests and two `portico agent`s (127.0.0.2 and 127.0.0.3);
//! cluster start, memory, Ingress and endpoint changes observed on both agents (latency, what
//! etcd wrote, the steps from the logs), then an agent's cold start from etcd and from its cache
//! with etcd stopped. Every process is stopped by PID before the next size.

mod changes;
mod cold;
mod etcd;
mod logs;
mod node;
mod pids;
mod report;
mod steps;
mod watch;

use crate::generate::{self, Layout, PortCycle, Sizes};
use crate::http::Http;
use crate::plan::Plan;
use crate::process::{hwm_kib, rss_kib};
use changes::{Sample, Target};
use etcd::Etcd;
use node::{AgentSpec, Env, Node};
use pids::Pids;
use report::{Change, Column};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use watch::CommitWatch;

#[derive(Debug, Clone)]
pub struct Options {
    pub portico: PathBuf,
    pub etcd: PathBuf,
    pub etcdctl: PathBuf,
    pub dir: PathBuf,
    /// Ingress counts; the rest of the cluster scales with them as in `scale`.
    pub sizes: Vec<usize>,
    pub changes: usize,
    pub cold_starts: usize,
    pub backends: usize,
    pub phase_budget: Duration,
}

/// Runs every size in turn; returns the table.
pub async fn run(o: Options) -> anyhow::Result<String> {
    let http = Http::default();
    let ports = crate::run::start_backends(o.backends).await?;
    let pids = Pids::new(&o.dir.join("pids"));
    let mut columns = Vec::new();
    for &n in &o.sizes {
        let dir = o.dir.join(format!("n{n}"));
        std::fs::create_dir_all(&dir)?;
        columns.push(one_size(&o, n, &ports, &dir, &pids, &http).await?);
    }
    Ok(report::render(&columns))
}

/// The cluster of `scale` with `n` Ingresses: 2 paths each over n/5 hosts, n/2 Services with 5
/// endpoints each, a TLS Secret for every tenth Ingress.
fn layout(n: usize, ports: &[u16]) -> anyhow::Result<Layout> {
    let sizes = Sizes {
        ingresses: n,
        hosts: (n / 5).max(1),
        paths: 2 * n,
        services: (n / 2).max(1),
        endpoints: 5 * n,
    };
    let layout = Layout::new(sizes, ports.to_vec(), PortCycle::PerService);
    Ok(layout.map_err(anyhow::Error::msg)?.with_tls(n / 10))
}

/// What runs for one size.
struct Cluster {
    etcd: Etcd,
    watch: CommitWatch,
    controller: Node,
    agents: Vec<Node>,
    specs: [AgentSpec; 2],
}

async fn one_size(
    o: &Options,
    n: usize,
    ports: &[u16],
    dir: &Path,
    pids: &Pids,
    http: &Http,
) -> anyhow::Result<Column> {
    let began = Instant::now();
    let layout = layout(n, ports)?;
    let plan = Plan::new(&layout, o.changes, 0);
    progress(began, n, "writing the manifests");
    let manifests = dir.join("manifests");
    generate::write_all(&manifests, &layout)?;
    let etcd = Etcd::start(&o.etcd, dir, pids, http).await?;
    let watch = CommitWatch::start(&o.etcdctl, &etcd.url(), pids)?;
    let store = format!("etcd://{}", etcd.client);
    let env = Env {
        bin: &o.portico,
        store: &store,
        pids,
    };
    let probe = stable_route(&layout, &plan);
    progress(began, n, "controller and two agents");
    let (mut cluster, start) =
        start_cluster(env, etcd, watch, dir, &manifests, http, &probe).await?;
    let rss = memory(&cluster, rss_kib).await;
    let mut column = Column {
        ingresses: n,
        tls_secrets: layout.tls_secrets,
        start,
        initial: cluster.watch.commits().first().copied(),
        rss,
        ..Column::default()
    };
    column.db_bytes = cluster.etcd.metrics(http).await?.db_bytes as u64;
    progress(began, n, &format!("ready after {start:?}; Ingress changes"));
    let fsync_before = cluster.etcd.metrics(http).await?;
    let t = Target {
        http,
        agents: [agent_http(&cluster, 0)?, agent_http(&cluster, 1)?],
        dir: &manifests,
        layout: &layout,
        etcd: &cluster.etcd,
        budget: o.phase_budget,
    };
    let ingress = changes::ingresses(t, &plan.ingress_changes).await?;
    progress(began, n, "endpoint changes");
    let endpoint = changes::endpoints(t, &plan.endpoint_changes).await?;
    let fsync_after = cluster.etcd.metrics(http).await?;
    column.fsync = (
        fsync_after.fsync_seconds - fsync_before.fsync_seconds,
        fsync_after.fsyncs - fsync_before.fsyncs,
    );
    column.hwm = memory(&cluster, hwm_kib).await;
    let logs = Logs::read(dir, &cluster.specs);
    column.ingress = explain(&ingress, &cluster.watch, &logs);
    column.endpoint = explain(&endpoint, &cluster.watch, &logs);
    let fresh = plan.ingress_changes[..ingress.len()].last().map(|c| {
        let host = layout.route(c.route).host;
        (host, c.new_path.clone())
    });
    let fresh = fresh.unwrap_or(probe);
    progress(began, n, "agent cold starts");
    let route = (fresh.0.as_str(), fresh.1.as_str());
    column.cold_etcd = cold::from_etcd(&mut cluster, env, http, route, o.cold_starts).await?;
    column.cold_cache = cold::from_cache(&mut cluster, env, http, route, o.cold_starts).await?;
    stop(cluster).await;
    progress(began, n, "done");
    Ok(column)
}

async fn start_cluster(
    env: Env<'_>,
    etcd: Etcd,
    watch: CommitWatch,
    dir: &Path,
    manifests: &Path,
    http: &Http,
    probe: &(String, String),
) -> anyhow::Result<(Cluster, Duration)> {
    let spec = |name: &str, ip: [u8; 4]| AgentSpec {
        name: format!("node-{name}"),
        ip: ip.into(),
        state: dir.join(format!("state-{name}")),
        log: dir.join(format!("agent-{name}.log")),
    };
    let specs = [spec("a", [127, 0, 0, 2]), spec("b", [127, 0, 0, 3])];
    let started = Instant::now();
    let controller = node::controller(env, manifests, &dir.join("controller.log")).await?;
    let agents = vec![
        node::agent(env, &specs[0]).await?,
        node::agent(env, &specs[1]).await?,
    ];
    let deadline = started + node::READY_TIMEOUT;
    for agent in &agents {
        agent.wait_ready(http, deadline).await?;
        agent
            .wait_route(http, (&probe.0, &probe.1), deadline)
            .await?;
    }
    let took = started.elapsed();
    let cluster = Cluster {
        etcd,
        watch,
        controller,
        agents,
        specs,
    };
    Ok((cluster, took))
}

/// A route that no Ingress change removes (the first route of Ingress 0 moves).
fn stable_route(layout: &Layout, plan: &Plan) -> (String, String) {
    let moved: Vec<usize> = plan.ingress_changes.iter().map(|c| c.route).collect();
    let k = (0..layout.sizes.paths)
        .find(|k| !moved.contains(k))
        .unwrap_or(0);
    let r = layout.route(k);
    (r.host, r.path)
}

fn agent_http(c: &Cluster, i: usize) -> anyhow::Result<std::net::SocketAddr> {
    c.agents
        .get(i)
        .and_then(|a| a.http)
        .ok_or_else(|| anyhow::anyhow!("agent {i} has no HTTP listener"))
}

/// `field` (KiB) of the controller, agent A, agent B and etcd, a second from now.
async fn memory(c: &Cluster, field: fn(u32) -> Option<u64>) -> [u64; 4] {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = |n: Option<&Node>| n.and_then(|n| field(n.pid)).unwrap_or(0);
    [
        pid(Some(&c.controller)),
        pid(c.agents.first()),
        pid(c.agents.get(1)),
        field(c.etcd.pid).unwrap_or(0),
    ]
}

/// The processes' logs, read once the changes are done.
struct Logs {
    controller: Vec<logs::Event>,
    agents: [Vec<logs::Event>; 2],
}

impl Logs {
    fn read(dir: &Path, specs: &[AgentSpec; 2]) -> Self {
        let read = |p: &Path| logs::parse(&std::fs::read_to_string(p).unwrap_or_default());
        Logs {
            controller: read(&dir.join("controller.log")),
            agents: [read(&specs[0].log), read(&specs[1].log)],
        }
    }
}

/// Each sample with the commits etcd recorded while it was served and its steps.
fn explain(samples: &[Sample], watch: &CommitWatch, logs: &Logs) -> Vec<Change> {
    let commits = watch.commits();
    let agents = [logs.agents[0].as_slice(), logs.agents[1].as_slice()];
    samples
        .iter()
        .map(|s| Change {
            sample: *s,
            commits: (commits.iter())
                .filter(|c| c.seen >= s.start && c.seen < s.end)
                .copied()
                .collect(),
            steps: steps::of(s, &logs.controller, agents),
        })
        .collect()
}

async fn stop(mut c: Cluster) {
    for agent in c.agents.drain(..) {
        agent.stop().await;
    }
    c.controller.stop().await;
    c.watch.stop().await;
    c.etcd.stop().await;
}

fn progress(began: Instant, n: usize, what: &str) {
    eprintln!(
        "distributed: [{n} Ingresses, {:6.1} s] {what}",
        began.elapsed().as_secs_f64()
    );
}
