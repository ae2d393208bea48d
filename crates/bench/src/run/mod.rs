//! The `scale` driver: echo backends, an idle Portico, the generated cluster, the big Portico
//! under light traffic (cold start, memory, Ingress and endpoint changes, memory return), then
//! nginx on the same routes; the report comes last.

pub(crate) mod changes;
pub(crate) mod kube;
mod memory;
pub(crate) mod portico;

use crate::generate::{self, Layout, PortCycle, Sizes};
use crate::http::Http;
use crate::nginx;
use crate::plan::Plan;
use crate::process;
use crate::report::{self, NginxResults, PorticoResults, Report};
use crate::traffic;
use changes::Target;
use portico::Portico;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Routes spread over the cluster that the traffic requests, besides those of changed Services.
const TRAFFIC_SPREAD: usize = 100;

#[derive(Debug, Clone)]
pub struct Options {
    pub portico: PathBuf,
    pub dir: PathBuf,
    pub sizes: Sizes,
    pub cycle: PortCycle,
    pub tls_secrets: usize,
    pub changes: usize,
    pub backends: usize,
    pub rate: u32,
    pub nginx: PathBuf,
    pub reloads: usize,
    pub phase_budget: Duration,
    /// Ingresses per Ingress file and Services per Service file.
    pub per_file: usize,
    /// Ingress changes for the RSS drift (0: none).
    pub drift_changes: usize,
    /// Kubernetes mode: the fake API server's binary, serving the generated objects.
    pub fake_apiserver: Option<PathBuf>,
    /// HTTPRoutes on one Gateway beside the Ingresses (0: none).
    pub http_routes: usize,
}

/// Runs every measurement; returns the report.
pub async fn scale(o: Options) -> anyhow::Result<String> {
    let began = Instant::now();
    let http = Http::default();
    let ports = start_backends(o.backends).await?;
    let layout = Layout::new(o.sizes, ports, o.cycle).map_err(anyhow::Error::msg)?;
    let layout = layout.with_tls(o.tls_secrets).with_per_file(o.per_file);
    let plan = Plan::new(&layout, o.changes, TRAFFIC_SPREAD);
    progress(began, "idle Portico on an empty directory");
    let idle_rss_kib = memory::idle(&o.portico, &o.dir, &http).await?;
    progress(began, "writing the manifests");
    let manifests = o.dir.join("manifests");
    generate::write_all(&manifests, &layout)?;
    generate::gateway::write_all(&manifests, &layout, o.http_routes)?;
    let api = match &o.fake_apiserver {
        Some(bin) => {
            progress(began, "loading the fake API server");
            let api = kube::FakeApi::start(bin, &o.dir, &manifests).await?;
            progress(
                began,
                &format!("the fake API server holds {} objects", api.objects),
            );
            Some(api)
        }
        None => None,
    };
    let measured = measure_portico(&o, &layout, &plan, &http, began, api.as_ref()).await;
    if let Some(api) = api {
        api.stop().await;
    }
    let mut results = measured?;
    results.idle_rss_kib = idle_rss_kib;
    progress(began, "nginx");
    let nginx = compare_nginx(&o, &layout, &plan, &http).await;
    progress(began, "done");
    let r = Report {
        portico: &results,
        nginx: &nginx,
        ingresses: o.sizes.ingresses,
        http_routes: o.http_routes,
    };
    Ok(report::render(r))
}

async fn measure_portico(
    o: &Options,
    layout: &Layout,
    plan: &Plan,
    http: &Http,
    began: Instant,
    api: Option<&kube::FakeApi>,
) -> anyhow::Result<PorticoResults> {
    let manifests = o.dir.join("manifests");
    progress(began, "cold start");
    let log = o.dir.join("portico.log");
    let started = Instant::now();
    let (portico, cold_start) = match api {
        Some(api) => Portico::start_kube(&o.portico, &api.kubeconfig, &log, http).await?,
        None => Portico::start(&o.portico, &manifests, &log, http).await?,
    };
    let routes = traffic_routes(layout, &plan.traffic);
    let load = traffic::start(http.clone(), portico.http, routes, o.rate);
    let ingresses_listed = portico.ingresses(http).await?;
    let routes_listed = match o.http_routes {
        0 => 0,
        _ => portico.http_routes(http).await?,
    };
    let route_status = match (api, o.http_routes) {
        (Some(api), 1..) => {
            progress(began, "waiting until every HTTPRoute has its status");
            let written = all_route_status(api, o.http_routes, started).await?;
            progress(
                began,
                &format!("every HTTPRoute's status after {written:?}"),
            );
            written
        }
        _ => None,
    };
    // Kubernetes mode: once ready, the leader writes every Ingress's status, and each write
    // comes back as a watch event; the timed changes start once that has died down.
    let quiet_after = match api {
        Some(_) => {
            progress(
                began,
                "waiting until Portico is quiet after its status writes",
            );
            let quiet = memory::quiet(portico.pid).await;
            progress(began, &format!("quiet after {quiet:?}"));
            quiet
        }
        None => None,
    };
    let (rss_kib, hwm_kib) = memory::settled(portico.pid).await?;
    let t = Target {
        http,
        proxy: portico.http,
        dir: &manifests,
        layout,
        budget: o.phase_budget,
        api,
    };
    progress(
        began,
        &format!("cold start took {cold_start:?}; Ingress changes"),
    );
    let ingress_changes = changes::ingresses(t, &plan.ingress_changes).await?;
    let route_changes = match o.http_routes {
        0 => Vec::new(),
        routes => {
            progress(began, "HTTPRoute changes");
            let planned = generate::gateway::changes(routes, o.changes);
            changes::http_routes(t, &planned).await?
        }
    };
    progress(began, "endpoint changes");
    let endpoint_changes = changes::endpoints(t, &plan.endpoint_changes).await?;
    progress(began, &format!("{} changes for RSS drift", o.drift_changes));
    let drift = changes::drift(t, &plan.ingress_changes, o.drift_changes, portico.pid).await?;
    let traffic = load.stop().await;
    progress(began, "deleting every file");
    let deleted_rss_kib = memory::after_deletion(&portico, &manifests, http, api).await?;
    let run_hwm_kib = process::hwm_kib(portico.pid).unwrap_or_default();
    portico.stop().await;
    Ok(PorticoResults {
        cold_start,
        ingresses_listed,
        rss_kib,
        hwm_kib,
        ingress_changes,
        endpoint_changes,
        traffic,
        idle_rss_kib: 0,
        deleted_rss_kib,
        run_hwm_kib,
        drift,
        quiet_after,
        routes_listed,
        route_changes,
        route_status,
    })
}

/// Kubernetes mode: polls the fake API server until all `routes` HTTPRoutes have a status;
/// how long after `started` (Portico's start) that was, or `None` after a minute.
async fn all_route_status(
    api: &kube::FakeApi,
    routes: usize,
    started: Instant,
) -> anyhow::Result<Option<Duration>> {
    let deadline = started + Duration::from_secs(60);
    loop {
        let (with, _) = api.routes_with_status().await?;
        if with >= routes {
            return Ok(Some(started.elapsed()));
        }
        if Instant::now() > deadline {
            eprintln!("scale:   {with} of {routes} HTTPRoutes have a status after a minute");
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn compare_nginx(
    o: &Options,
    layout: &Layout,
    plan: &Plan,
    http: &Http,
) -> Result<NginxResults, String> {
    let dir = o.dir.join("nginx");
    let options = nginx::Options {
        bin: &o.nginx,
        dir: &dir,
        reloads: o.reloads,
        rate: o.rate,
        manifests: &o.dir.join("manifests"),
    };
    nginx::compare(options, layout, plan, http)
        .await
        .map_err(|e| format!("{e:#}"))
}

/// `count` echo backends on 127.0.0.1 (service `scale`, pods `backend-N`); their ports.
pub async fn start_backends(count: usize) -> anyhow::Result<Vec<u16>> {
    let mut ports = Vec::new();
    for n in 0..count.max(1) {
        let any = ([127, 0, 0, 1], 0).into();
        let addr = portico_echo::spawn(any, "scale", &format!("backend-{n}")).await?;
        ports.push(addr.port());
    }
    Ok(ports)
}

/// (host, path) of each route index.
pub fn traffic_routes(layout: &Layout, routes: &[usize]) -> Vec<(String, String)> {
    routes
        .iter()
        .map(|&k| {
            let r = layout.route(k);
            (r.host, r.path)
        })
        .collect()
}

fn progress(began: Instant, what: &str) {
    eprintln!("scale: [{:6.1} s] {what}", began.elapsed().as_secs_f64());
}
