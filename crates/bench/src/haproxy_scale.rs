//! The `haproxy-scale` driver: the 10,000-Ingress cluster of `scale` (every endpoint a distinct
//! pool member) served by the haproxy provider, then by the built-in proxy on the same files,
//! each under light traffic: cold start to serving, one-Ingress changes, one-endpoint changes
//! (one endpoint of a Service moved to a marker backend) with the haproxy reloads they caused,
//! failed requests, and the data plane's CPU per request on a route near the start of the
//! route table and one near its end.

use crate::generate::{self, Layout, PortCycle, Sizes, Staged};
use crate::http::Http;
use crate::plan::{EndpointChange, Plan};
use crate::poll::observed_after;
use crate::report::stats::{Summary, duration, summarize};
use crate::run::changes::{self, Target};
use crate::run::portico::Portico;
use crate::traffic::{self, Tally};
use anyhow::{Context, bail};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Options {
    pub portico: PathBuf,
    pub dir: PathBuf,
    pub sizes: Sizes,
    pub cycle: PortCycle,
    pub changes: usize,
    pub backends: usize,
    pub rate: u32,
    pub phase_budget: Duration,
    /// Requests per route for the CPU measurement.
    pub cpu_requests: usize,
    /// Run Portico under this hard and soft open-file limit (`prlimit`), which haproxy
    /// inherits; `None`: the bench's own.
    pub nofile: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    Haproxy,
    Proxy,
}

#[derive(Debug)]
struct Results {
    ready: Duration,
    serving: Duration,
    ingress: Vec<Option<Duration>>,
    ingress_reloads: u64,
    endpoint: Vec<Option<Duration>>,
    endpoint_reloads: u64,
    runtime_updates: u64,
    traffic: Tally,
    /// CPU µs per request on the first and on the last route, and the idle CPU in ms/s.
    cpu_first_us: f64,
    cpu_last_us: f64,
    idle_ms_per_s: f64,
    config_lines: usize,
    cpu_routes: (generate::Route, generate::Route),
    /// The diagnostics that name what was reduced to fit the descriptor limit.
    reductions: Vec<String>,
}

pub async fn run(o: Options) -> anyhow::Result<String> {
    let began = Instant::now();
    let http = Http::default();
    let ports = crate::run::start_backends(o.backends).await?;
    let layout = Layout::new(o.sizes, ports, o.cycle).map_err(anyhow::Error::msg)?;
    let plan = Plan::new(&layout, o.changes, 100);
    let manifests = o.dir.join("manifests");
    progress(began, "writing the manifests");
    generate::write_all(&manifests, &layout)?;
    let mut out = Vec::new();
    for provider in [Provider::Haproxy, Provider::Proxy] {
        progress(began, &format!("{provider:?}"));
        let r = measure(&o, provider, &layout, &plan, &http, began).await;
        // The files changed back: each provider starts from the generated cluster.
        generate::write_all(&manifests, &layout)?;
        out.push((provider, r));
    }
    progress(began, "done");
    Ok(report(&o, &out))
}

async fn measure(
    o: &Options,
    provider: Provider,
    layout: &Layout,
    plan: &Plan,
    http: &Http,
    began: Instant,
) -> anyhow::Result<Results> {
    let manifests = o.dir.join("manifests");
    let mut extra = Vec::new();
    if provider == Provider::Haproxy {
        extra.extend([
            "--provider".to_owned(),
            "haproxy".to_owned(),
            format!("--state-dir={}", o.dir.join("state").display()),
            format!("--http-listen=127.0.0.1:{}", free_port()?),
            format!("--https-listen=127.0.0.1:{}", free_port()?),
        ]);
    }
    let log = o.dir.join(format!("portico-{provider:?}.log"));
    let spawned = Instant::now();
    let (portico, ready) =
        Portico::start_limited(&o.portico, &manifests, &log, http, &extra, o.nofile).await?;
    let first = layout.route(0);
    let last = layout.route(layout.sizes.paths - 1);
    let serving = async || {
        http.status(portico.http, &first.host, &first.path).await == Some(200)
            && http.status(portico.http, &last.host, &last.path).await == Some(200)
    };
    let Some(_) = observed_after(Instant::now(), serving).await else {
        bail!("{provider:?}: the first and last routes were not served");
    };
    let mut r = Results {
        ready,
        serving: spawned.elapsed(),
        ingress: vec![],
        ingress_reloads: 0,
        endpoint: vec![],
        endpoint_reloads: 0,
        runtime_updates: 0,
        traffic: Tally::default(),
        cpu_first_us: 0.0,
        cpu_last_us: 0.0,
        idle_ms_per_s: 0.0,
        config_lines: 0,
        cpu_routes: (first.clone(), last.clone()),
        reductions: reductions(http, portico.admin).await,
    };
    r.config_lines = config_lines(&o.dir.join("state"));
    progress(began, &format!("serving after {:?}", r.serving));
    let routes = crate::run::traffic_routes(layout, &plan.traffic);
    let load = traffic::start(http.clone(), portico.http, routes, o.rate);
    let t = Target {
        http,
        proxy: portico.http,
        dir: &manifests,
        layout,
        budget: o.phase_budget,
        api: None,
    };
    let before = counter(http, portico.admin, "portico_haproxy_reloads_total").await;
    r.ingress = changes::ingresses(t, &plan.ingress_changes).await?;
    let middle = counter(http, portico.admin, "portico_haproxy_reloads_total").await;
    progress(began, "endpoint changes");
    let per_endpoint = o.cycle != PortCycle::PerService;
    r.endpoint = one_endpoint_changes(t, &plan.endpoint_changes, per_endpoint).await?;
    let after = counter(http, portico.admin, "portico_haproxy_reloads_total").await;
    r.ingress_reloads = middle - before;
    r.endpoint_reloads = after - middle;
    r.runtime_updates = counter(http, portico.admin, "portico_haproxy_runtime_updates_total").await;
    r.traffic = load.stop().await;
    progress(began, "CPU per request");
    let pids = || match provider {
        Provider::Haproxy => descendants(portico.pid),
        Provider::Proxy => vec![portico.pid],
    };
    let idle_start = cpu_ns(&pids());
    tokio::time::sleep(Duration::from_secs(2)).await;
    r.idle_ms_per_s = (cpu_ns(&pids()) - idle_start) as f64 / 2e6;
    // Routes the changes left alone: the first and the last of those the traffic requests.
    let near_start = layout.route(plan.traffic.iter().copied().min().unwrap_or(0));
    let near_end = layout.route(plan.traffic.iter().copied().max().unwrap_or(0));
    r.cpu_routes = (near_start.clone(), near_end.clone());
    r.cpu_first_us =
        cpu_per_request(http, portico.http, &near_start, o.cpu_requests, &pids).await?;
    r.cpu_last_us = cpu_per_request(http, portico.http, &near_end, o.cpu_requests, &pids).await?;
    portico.stop().await;
    Ok(r)
}

/// Each change moves a Service's endpoints to a new marker backend and is timed until the
/// marker answers; then the Service is restored. With distinct members (a port or an address
/// per endpoint) only the first endpoint moves; otherwise (every endpoint of a Service at one
/// address and port: one member) all of them do, as in `scale`.
async fn one_endpoint_changes(
    t: Target<'_>,
    changes: &[EndpointChange],
    per_endpoint: bool,
) -> anyhow::Result<Vec<Option<Duration>>> {
    let started = Instant::now();
    let mut out = Vec::new();
    for (n, c) in changes.iter().enumerate() {
        if started.elapsed() > t.budget {
            break;
        }
        let pod = format!("marker-{n}");
        let marker = portico_echo::spawn(([127, 0, 0, 1], 0).into(), "marker", &pod)
            .await
            .context("starting a marker backend")?;
        let file = generate::service_file(t.dir, t.layout, c.service);
        let route = t.layout.route(c.route);
        let moved = if per_endpoint {
            let mut endpoints = t.layout.service_endpoints(c.service);
            endpoints[0] = generate::yaml::Endpoint::local(marker.port());
            generate::yaml::service(&t.layout.service_name(c.service), &endpoints)
        } else {
            generate::service_yaml_on(t.layout, c.service, marker.port())
        };
        let staged = Staged::write(&file, &moved)?;
        let start = Instant::now();
        staged.commit()?;
        let by_marker = async || {
            let reply = t.http.get(t.proxy, &route.host, &route.path).await;
            reply.is_ok_and(|r| r.status == 200 && r.pod().as_deref() == Some(pod.as_str()))
        };
        out.push(observed_after(start, by_marker).await);
        Staged::write(&file, &generate::service_yaml(t.layout, c.service))?.commit()?;
        // Until the marker is out of rotation again: a round of answers without it.
        let restored = async || {
            for _ in 0..t.layout.endpoints_of_service(c.service).len() * 2 {
                let reply = t.http.get(t.proxy, &route.host, &route.path).await;
                if reply.is_ok_and(|r| r.pod().as_deref() == Some(pod.as_str())) {
                    return false;
                }
            }
            true
        };
        if observed_after(Instant::now(), restored).await.is_none() {
            bail!("{}{} still answered by the marker", route.host, route.path);
        }
    }
    Ok(out)
}

/// CPU µs per request over `n` requests (8 at a time) to `route`.
async fn cpu_per_request(
    http: &Http,
    to: SocketAddr,
    route: &generate::Route,
    n: usize,
    pids: &impl Fn() -> Vec<u32>,
) -> anyhow::Result<f64> {
    let before = cpu_ns(&pids());
    let mut set = tokio::task::JoinSet::new();
    for worker in 0..8 {
        let (http, route) = (http.clone(), route.clone());
        let count = n / 8 + usize::from(worker < n % 8);
        set.spawn(async move {
            let mut failed = 0;
            for _ in 0..count {
                if http.status(to, &route.host, &route.path).await != Some(200) {
                    failed += 1;
                }
            }
            failed
        });
    }
    let mut failed = 0;
    while let Some(f) = set.join_next().await {
        failed += f.unwrap_or(1);
    }
    if failed > 0 {
        bail!(
            "{failed} of {n} requests to {}{} failed",
            route.host,
            route.path
        );
    }
    Ok((cpu_ns(&pids()) - before) as f64 / 1e3 / n as f64)
}

/// Time on CPU of every thread of `pids`, in ns (`/proc/<pid>/task/*/schedstat`).
fn cpu_ns(pids: &[u32]) -> u64 {
    let mut total = 0;
    for pid in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            total += stat
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    total
}

/// Every process below `pid` (haproxy's master and workers below Portico).
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut next = children(pid);
    while let Some(p) = next.pop() {
        next.extend(children(p));
        out.push(p);
    }
    out
}

/// The children of every thread of `pid` (a child is listed under the thread that forked it).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![];
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// A counter from Portico's /metrics (0 when absent).
async fn counter(http: &Http, admin: SocketAddr, name: &str) -> u64 {
    let Ok(reply) = http.get(admin, "localhost", "/metrics").await else {
        return 0;
    };
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0)
}

/// The messages of Portico's diagnostics that name a reduction to fit the descriptor limit.
async fn reductions(http: &Http, admin: SocketAddr) -> Vec<String> {
    let Ok(reply) = http.get(admin, "localhost", "/api/v1/diagnostics").await else {
        return vec![];
    };
    let list: serde_json::Value = serde_json::from_slice(&reply.body).unwrap_or_default();
    let items = list.as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter_map(|d| d["message"].as_str())
        .filter(|m| m.contains("descriptor limit"))
        .map(str::to_owned)
        .collect()
}

/// Lines of the haproxy.conf under `state` (0 without one).
fn config_lines(state: &Path) -> usize {
    let root = state.join("loadbalancer/haproxy");
    let Ok(dirs) = std::fs::read_dir(root) else {
        return 0;
    };
    dirs.flatten()
        .filter_map(|d| std::fs::read_to_string(d.path().join("haproxy.conf")).ok())
        .map(|c| c.lines().count())
        .sum()
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// How one row of the table shows a provider's results.
type Cell = Box<dyn Fn(&Results) -> String>;

fn report(o: &Options, results: &[(Provider, anyhow::Result<Results>)]) -> String {
    let s = &o.sizes;
    let limit = match o.nofile {
        Some(n) => format!(", Portico (and haproxy) under a hard limit of {n} open files"),
        None => String::new(),
    };
    let mut t = format!(
        "\n{} Ingresses, {} paths over {} hosts, {} Services, {} endpoints ({}), light traffic \
         {} requests/s{limit}\n\n",
        s.ingresses,
        s.paths,
        s.hosts,
        s.services,
        s.endpoints,
        match o.cycle {
            PortCycle::PerEndpoint => "each a distinct pool member",
            PortCycle::PodAddresses =>
                "each on an address of its own, the first of each Service live, the others not ready",
            PortCycle::PerService => "those of a Service at one address and port: one member",
        },
        o.rate,
    );
    t.push_str("| measure | target | haproxy | built-in proxy |\n| --- | --- | --- | --- |\n");
    let cell = |p: Provider, f: &dyn Fn(&Results) -> String| -> String {
        results
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, r)| match r {
                Ok(r) => f(r),
                Err(e) => format!("failed: {e:#}"),
            })
            .unwrap_or_default()
    };
    let summary = |s: Option<Summary>| {
        s.map_or("none".to_owned(), |s| {
            format!(
                "p50 {} / p99 {} / max {} (n={}, {} not served)",
                duration(s.p50),
                duration(s.p99),
                duration(s.max),
                s.n,
                s.timeouts
            )
        })
    };
    let rows: Vec<(&str, &str, Cell)> = vec![
        ("cold start to /readyz", "", Box::new(|r| duration(r.ready))),
        (
            "cold start to serving (first and last route)",
            "< 5 s",
            Box::new(|r| duration(r.serving)),
        ),
        (
            "haproxy.conf lines",
            "",
            Box::new(|r| r.config_lines.to_string()),
        ),
        (
            "one-Ingress change served",
            "",
            Box::new(move |r| summary(summarize(&r.ingress))),
        ),
        (
            "reloads during the Ingress changes",
            "0",
            Box::new(|r| r.ingress_reloads.to_string()),
        ),
        (
            "endpoint change served",
            "",
            Box::new(move |r| summary(summarize(&r.endpoint))),
        ),
        (
            "reloads during the endpoint changes",
            "0",
            Box::new(|r| r.endpoint_reloads.to_string()),
        ),
        (
            "runtime API updates (haproxy)",
            "",
            Box::new(|r| r.runtime_updates.to_string()),
        ),
        (
            "failed requests (light traffic)",
            "0",
            Box::new(|r| {
                format!(
                    "{} of {} {:?}",
                    r.traffic.failed, r.traffic.sent, r.traffic.samples
                )
            }),
        ),
        (
            "CPU per request, a route near the start",
            "",
            Box::new(|r| {
                format!(
                    "{:.0} µs ({}{})",
                    r.cpu_first_us, r.cpu_routes.0.host, r.cpu_routes.0.path
                )
            }),
        ),
        (
            "CPU per request, a route near the end",
            "",
            Box::new(|r| {
                format!(
                    "{:.0} µs ({}{})",
                    r.cpu_last_us, r.cpu_routes.1.host, r.cpu_routes.1.path
                )
            }),
        ),
        (
            "idle CPU (health checks, timers)",
            "",
            Box::new(|r| format!("{:.1} ms/s", r.idle_ms_per_s)),
        ),
    ];
    for (name, target, f) in &rows {
        let _ = writeln!(
            t,
            "| {name} | {target} | {} | {} |",
            cell(Provider::Haproxy, f.as_ref()),
            cell(Provider::Proxy, f.as_ref())
        );
    }
    for (provider, r) in results {
        for message in r.iter().flat_map(|r| &r.reductions) {
            let _ = writeln!(
                t,
                "\n{provider:?}, reduced to fit the descriptor limit: {message}"
            );
        }
    }
    t
}

fn progress(began: Instant, what: &str) {
    eprintln!(
        "haproxy-scale: [{:6.1} s] {what}",
        began.elapsed().as_secs_f64()
    );
}
