//! `portico-bench balance`: least request against round robin when one member is slow. Three
//! echo backends, the third answering `delay` later; one Ingress per algorithm on the same
//! Service (two pools); for each provider (the built-in proxy, haproxy) and algorithm, a fixed
//! number of clients sending requests back to back for a fixed time. Prints p50/p99 latency,
//! throughput and each member's share as a Markdown table.

use crate::http::Http;
use crate::run::portico::Portico;
use anyhow::Context;
use portico_echo::Behaviour;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Options {
    pub portico: PathBuf,
    pub dir: PathBuf,
    pub duration: Duration,
    pub concurrency: usize,
    pub delay: Duration,
}

const CASES: [(&str, &str); 2] = [("round robin", "rr.bench"), ("least request", "lr.bench")];

pub async fn run(options: Options) -> anyhow::Result<String> {
    std::fs::create_dir_all(&options.dir)?;
    let manifests = options.dir.join("manifests");
    std::fs::create_dir_all(&manifests)?;
    let mut addrs = Vec::new();
    for i in 0..3 {
        let behaviour = Arc::new(Behaviour::default());
        if i == 2 {
            let ms = u64::try_from(options.delay.as_millis()).unwrap_or(u64::MAX);
            behaviour.delay_ms.store(ms, Ordering::Relaxed);
        }
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        addrs.push(portico_echo::spawn_with(any, "web", &format!("web-{i}"), behaviour).await?);
    }
    std::fs::write(manifests.join("cluster.yaml"), cluster(&addrs))?;
    let http = Http::default();
    let mut table = format!(
        "Three members, web-2 answering {} ms later; {} clients back to back for {} s per row.\n\n\
         | provider | algorithm | req/s | p50 ms | p99 ms | web-0 | web-1 | web-2 (slow) |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        options.delay.as_millis(),
        options.concurrency,
        options.duration.as_secs()
    );
    for provider in ["proxy", "haproxy"] {
        let mut extra = Vec::new();
        if provider == "haproxy" {
            let state = options.dir.join("haproxy-state");
            std::fs::create_dir_all(&state)?;
            extra = vec![
                format!("--http-listen=127.0.0.1:{}", free_port()?),
                format!("--https-listen=127.0.0.1:{}", free_port()?),
                "--provider=haproxy".to_owned(),
                format!("--state-dir={}", state.display()),
            ];
        }
        let log = options.dir.join(format!("{provider}.log"));
        let (portico, _) = Portico::start_with(&options.portico, &manifests, &log, &http, &extra)
            .await
            .with_context(|| format!("starting portico with provider {provider}"))?;
        for (algorithm, host) in CASES {
            wait_served(&http, portico.http, host).await?;
            let r = load(&http, portico.http, host, &options).await;
            let share = |pod: &str| {
                let n = r.pods.get(pod).copied().unwrap_or(0);
                format!("{:.0} %", 100.0 * n as f64 / r.total.max(1) as f64)
            };
            let _ = writeln!(
                table,
                "| {provider} | {algorithm} | {:.0} | {:.1} | {:.1} | {} | {} | {} |",
                r.total as f64 / options.duration.as_secs_f64(),
                ms(r.percentile(0.5)),
                ms(r.percentile(0.99)),
                share("web-0"),
                share("web-1"),
                share("web-2"),
            );
        }
        portico.stop().await;
    }
    Ok(table)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The Service `web` (one EndpointSlice per member, each on its own port) and two Ingresses.
fn cluster(addrs: &[SocketAddr]) -> String {
    let mut y = String::from(
        "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: bench}\nspec:\n  \
         selector: {app: web}\n  ports: [{name: http, port: 80, targetPort: 8080}]\n",
    );
    for (i, a) in addrs.iter().enumerate() {
        let _ = write!(
            y,
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: web-{i}\n  \
             namespace: bench\n  labels: {{kubernetes.io/service-name: web}}\naddressType: IPv4\n\
             ports: [{{name: http, port: {}}}]\nendpoints:\n  - addresses: [\"{}\"]\n",
            a.port(),
            a.ip()
        );
    }
    for (name, host, algorithm) in [
        ("rr", "rr.bench", "round_robin"),
        ("lr", "lr.bench", "ewma"),
    ] {
        let _ = write!(
            y,
            "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  \
             namespace: bench\n  annotations:\n    nginx.ingress.kubernetes.io/load-balance: \
             {algorithm}\nspec:\n  ingressClassName: portico\n  rules:\n    - host: {host}\n      \
             http:\n        paths:\n          - path: /\n            pathType: Prefix\n"
        );
        y.push_str(
            "            backend:\n              service:\n                name: web\n                \
             port: {number: 80}\n"
        );
    }
    y
}

async fn wait_served(http: &Http, to: SocketAddr, host: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if http
            .get(to, host, "/")
            .await
            .is_ok_and(|r| r.pod().is_some())
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("{host} not served within 30 s")
}

struct Load {
    latencies: Vec<Duration>,
    pods: BTreeMap<String, usize>,
    total: usize,
}

impl Load {
    fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.latencies.len() - 1) as f64 * p).round() as usize;
        self.latencies[i]
    }
}

async fn load(http: &Http, to: SocketAddr, host: &str, options: &Options) -> Load {
    let until = Instant::now() + options.duration;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..options.concurrency {
        let (http, host) = (http.clone(), host.to_owned());
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            let mut pods: BTreeMap<String, usize> = BTreeMap::new();
            while Instant::now() < until {
                let started = Instant::now();
                let reply = http.get(to, &host, "/").await;
                latencies.push(started.elapsed());
                let pod = reply.ok().and_then(|r| r.pod()).unwrap_or_default();
                *pods.entry(pod).or_default() += 1;
            }
            (latencies, pods)
        });
    }
    let mut all = Load {
        latencies: Vec::new(),
        pods: BTreeMap::new(),
        total: 0,
    };
    while let Some(Ok((latencies, pods))) = tasks.join_next().await {
        all.total += latencies.len();
        all.latencies.extend(latencies);
        for (pod, n) in pods {
            *all.pods.entry(pod).or_default() += n;
        }
    }
    all.latencies.sort();
    all
}
