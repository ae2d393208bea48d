//! `portico-bench`: the control-plane benchmark behind `bench/scale.sh`. `gen` writes the
//! manifests of a large cluster (Ingresses, Services, EndpointSlices whose endpoints are
//! loopback backends); `scale` runs the real `portico` binary against them under light traffic
//! and measures cold start, memory, how fast an Ingress or endpoint change is served and how
//! much memory comes back after deletion, beside nginx's config check, start and reload on the
//! same routes, and prints a Markdown table. `distributed` runs the same cluster through etcd:
//! `portico controller` and two `portico agent`s, changes observed on both agents, what etcd
//! wrote per change, and an agent's cold start from etcd and from its cache. `l4-echo` and
//! `l4-load` are the TCP backends and load of `bench/l4.sh`. It is a measurement, not a test: a missed target is
//! printed, never turned into a failure. It depends on `portico-echo` only, for the echo
//! backends, and talks to Portico and nginx as an outsider (processes, files, HTTP).

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod balance;
mod distributed;
mod floor;
mod generate;
mod haproxy_scale;
mod hload;
mod http;
mod l4;
mod nginx;
mod plan;
mod poll;
mod process;
mod raw_floor;
mod report;
mod run;
mod traffic;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use generate::{Layout, PortCycle, Sizes};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(name = "portico-bench", about = "Control-plane benchmark for Portico")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Write a large cluster's manifests (kubectl-style YAML) under DIR.
    Gen(GenArgs),
    /// Generate the cluster, measure Portico and nginx against it, print a Markdown table.
    Scale(ScaleArgs),
    /// The 10,000-Ingress cluster served by the haproxy provider and by the built-in proxy:
    /// cold start, change latencies, reloads, failures, CPU per request.
    HaproxyScale(HaproxyScaleArgs),
    /// Run the cluster through etcd (a controller, two agents) at each size; print a table.
    Distributed(DistributedArgs),
    /// Least request against round robin with one slow member, both providers; print a table.
    Balance(BalanceArgs),
    /// TCP echo backends on the given addresses, until stopped (bench/l4.sh).
    L4Echo(L4EchoArgs),
    /// TCP load against one address for a while; prints the totals (bench/l4.sh).
    L4Load(L4LoadArgs),
    /// GET requests over HTTP/3 or HTTP/2 over TLS, one in flight per connection, for a
    /// while; prints the totals (bench/http3.sh).
    HLoad(HLoadArgs),
    /// A minimal reverse proxy on hyper (HTTP/1.1, one thread, round robin, keep-alive
    /// upstreams): the floor of the library's cost per request (bench/proxy.sh, proxy `floor`).
    HyperFloor(HyperFloorArgs),
    /// The same minimal proxy with an HTTP/1.1 path of its own (httparse, one task per client
    /// connection, no hyper): the floor of a proxy that does not use the library
    /// (bench/proxy.sh, proxy `raw`).
    RawFloor(RawFloorArgs),
}

#[derive(Args, Debug)]
struct RawFloorArgs {
    #[arg(long)]
    listen: std::net::SocketAddr,
    /// `HOST/PREFIX=ADDR,ADDR…`, as for `hyper-floor`.
    #[arg(long = "route", required = true)]
    routes: Vec<floor::Route>,
}

#[derive(Args, Debug)]
struct HyperFloorArgs {
    #[arg(long)]
    listen: std::net::SocketAddr,
    /// `HOST/PREFIX=ADDR,ADDR…`: requests for HOST whose path starts with /PREFIX/ go round
    /// robin to the addresses (repeatable).
    #[arg(long = "route", required = true)]
    routes: Vec<floor::Route>,
    /// Drive each upstream connection inside the client connection's task that uses it
    /// (polled beside the request and the response body) instead of in a task of its own.
    #[arg(long)]
    inline: bool,
}

#[derive(Args, Debug)]
struct L4EchoArgs {
    /// Where to listen (repeatable).
    #[arg(long = "listen", required = true)]
    listen: Vec<std::net::SocketAddr>,
}

#[derive(Args, Debug)]
struct L4LoadArgs {
    #[arg(long)]
    target: std::net::SocketAddr,
    #[arg(long, value_enum)]
    mode: l4::Mode,
    /// Clients at once (short connections) or long connections.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 5)]
    duration: u64,
    /// Bytes per write (each short connection sends and reads back one write).
    #[arg(long, default_value_t = 64)]
    size: usize,
}

#[derive(Args, Debug)]
struct HLoadArgs {
    #[arg(long, value_enum)]
    protocol: hload::Protocol,
    /// The proxy's HTTPS address (UDP for HTTP/3, TCP for HTTP/2).
    #[arg(long)]
    target: std::net::SocketAddr,
    /// Host (and SNI) of the requests.
    #[arg(long)]
    host: String,
    #[arg(long, default_value = "/")]
    path: String,
    #[arg(long, default_value_t = 50)]
    connections: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 5)]
    duration: u64,
}

#[derive(Args, Debug)]
struct BalanceArgs {
    /// The `portico` binary to measure.
    #[arg(long)]
    portico: PathBuf,
    /// Work directory: manifests, logs, haproxy's state (left for the caller to remove).
    #[arg(long)]
    dir: PathBuf,
    /// Seconds of load per provider and algorithm.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Clients sending requests back to back.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// The slow member's added delay, in milliseconds.
    #[arg(long, default_value_t = 50)]
    delay_ms: u64,
}

#[derive(Args, Debug, Clone, Copy)]
struct SizeArgs {
    #[arg(long, default_value_t = 10_000)]
    ingresses: usize,
    #[arg(long, default_value_t = 2_000)]
    hosts: usize,
    /// Host/path routes, spread evenly over the hosts and over the Ingresses.
    #[arg(long, default_value_t = 20_000)]
    paths: usize,
    #[arg(long, default_value_t = 5_000)]
    services: usize,
    /// Endpoints, spread evenly over the Services; all at 127.0.0.1.
    #[arg(long, default_value_t = 50_000)]
    endpoints: usize,
    /// Cycle the backend ports per endpoint instead of per Service, so that every endpoint is
    /// a distinct pool member; each Service then gets one EndpointSlice per port (an
    /// EndpointSlice lists one port for all its endpoints).
    #[arg(long, conflicts_with = "pod_addresses")]
    port_per_endpoint: bool,
    /// Give every endpoint an address of its own, as pods have: each Service's first endpoint
    /// on 127.0.0.1 where its echo backend answers, the others on distinct loopback addresses
    /// nobody listens on (127.1.0.0 and up), not ready.
    #[arg(long)]
    pod_addresses: bool,
    /// Ingresses (spread evenly) that terminate TLS, each with a `kubernetes.io/tls` Secret of
    /// its own (an ECDSA P-256 certificate for its hosts).
    #[arg(long, default_value_t = 1_000)]
    tls_secrets: usize,
}

impl SizeArgs {
    fn cycle(&self) -> PortCycle {
        if self.pod_addresses {
            PortCycle::PodAddresses
        } else if self.port_per_endpoint {
            PortCycle::PerEndpoint
        } else {
            PortCycle::PerService
        }
    }
}

impl From<SizeArgs> for Sizes {
    fn from(s: SizeArgs) -> Self {
        Sizes {
            ingresses: s.ingresses,
            hosts: s.hosts,
            paths: s.paths,
            services: s.services,
            endpoints: s.endpoints,
        }
    }
}

#[derive(Args, Debug)]
struct GenArgs {
    #[arg(long)]
    dir: PathBuf,
    #[command(flatten)]
    sizes: SizeArgs,
    /// Backend ports on 127.0.0.1 the endpoints cycle over.
    #[arg(long, value_delimiter = ',', default_value = "8081")]
    backends: Vec<u16>,
    /// Ingresses per Ingress file and Services per Service file (multi-document files).
    #[arg(long, default_value_t = 1)]
    per_file: usize,
}

#[derive(Args, Debug)]
struct ScaleArgs {
    /// The `portico` binary to measure.
    #[arg(long)]
    portico: PathBuf,
    /// Work directory: manifests, logs, nginx files (left for the caller to remove).
    #[arg(long)]
    dir: PathBuf,
    #[command(flatten)]
    sizes: SizeArgs,
    /// How many Ingress changes and how many endpoint changes to time.
    #[arg(long, default_value_t = 100)]
    changes: usize,
    /// Echo backends to start; each Service's endpoints cycle over their ports.
    #[arg(long, default_value_t = 10)]
    backends: usize,
    /// Requests per second of the light traffic.
    #[arg(long, default_value_t = 200)]
    rate: u32,
    /// The nginx binary for the comparison.
    #[arg(long, default_value = "nginx")]
    nginx: PathBuf,
    /// How many nginx reloads to time.
    #[arg(long, default_value_t = 10)]
    reloads: usize,
    /// Seconds each of the two change phases may take; the changes left are skipped (the
    /// table gives the number measured).
    #[arg(long, default_value_t = 300)]
    phase_budget: u64,
    /// Ingresses per Ingress file and Services per Service file: with more than 1, the
    /// manifests are multi-document files and a change rewrites a whole file.
    #[arg(long, default_value_t = 1)]
    per_file: usize,
    /// Ingress changes in a row after the timed ones, for RSS drift (after the first tenth,
    /// against the end); 0 skips them.
    #[arg(long, default_value_t = 1000)]
    drift_changes: usize,
    /// Kubernetes mode: serve the generated objects from this fake API server binary
    /// (`cargo build --release -p portico-fake-apiserver --example fake-apiserver`) and run
    /// `portico run --kubernetes` against it instead of `-f`.
    #[arg(long, value_name = "BIN")]
    fake_apiserver: Option<PathBuf>,
    /// HTTPRoutes on one Gateway beside the Ingresses (each its own hostname, two rules to two
    /// of the Services); their changes are timed like the Ingresses' and, in Kubernetes mode,
    /// the time until every one has its status.
    #[arg(long, default_value_t = 0)]
    http_routes: usize,
}

#[derive(Args, Debug)]
struct HaproxyScaleArgs {
    /// The `portico` binary to measure.
    #[arg(long)]
    portico: PathBuf,
    /// Work directory: manifests, logs, the haproxy state directory.
    #[arg(long)]
    dir: PathBuf,
    #[command(flatten)]
    sizes: SizeArgs,
    /// How many Ingress changes and how many endpoint changes to time, per provider.
    #[arg(long, default_value_t = 50)]
    changes: usize,
    /// Echo backends to start; each Service's endpoints cycle over their ports.
    #[arg(long, default_value_t = 10)]
    backends: usize,
    /// Requests per second of the light traffic.
    #[arg(long, default_value_t = 100)]
    rate: u32,
    /// Seconds each change phase may take.
    #[arg(long, default_value_t = 120)]
    phase_budget: u64,
    /// Requests per route for the CPU measurement.
    #[arg(long, default_value_t = 4000)]
    cpu_requests: usize,
    /// Run Portico (and so haproxy) under this hard and soft open-file limit (`prlimit`).
    #[arg(long, value_name = "N")]
    nofile: Option<u64>,
}

#[derive(Args, Debug)]
struct DistributedArgs {
    /// The `portico` binary to measure.
    #[arg(long)]
    portico: PathBuf,
    /// Work directory: manifests, etcd's data, logs, the PID list (left for the caller).
    #[arg(long)]
    dir: PathBuf,
    /// Cluster sizes in Ingresses, each run from scratch (the rest scales as in `scale`).
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    sizes: Vec<usize>,
    /// How many Ingress changes and how many endpoint changes to time per size.
    #[arg(long, default_value_t = 50)]
    changes: usize,
    /// How many cold starts of an agent to time, from etcd and from its cache each.
    #[arg(long, default_value_t = 3)]
    cold_starts: usize,
    /// Echo backends to start; each Service's endpoints cycle over their ports.
    #[arg(long, default_value_t = 10)]
    backends: usize,
    #[arg(long, default_value = "etcd")]
    etcd: PathBuf,
    #[arg(long, default_value = "etcdctl")]
    etcdctl: PathBuf,
    /// Seconds each change phase may take; the changes left are skipped.
    #[arg(long, default_value_t = 120)]
    phase_budget: u64,
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Gen(args) => generate(args),
        Command::Scale(args) => scale(args),
        Command::HaproxyScale(args) => haproxy_scale(args),
        Command::Distributed(args) => distributed(args),
        Command::Balance(args) => balance(args),
        Command::L4Echo(args) => {
            let runtime = tokio::runtime::Runtime::new()?;
            runtime.block_on(l4::echo(args.listen))
        }
        Command::L4Load(args) => l4_load(args),
        Command::HLoad(args) => h_load(args),
        Command::HyperFloor(args) => floor::run(args.listen, args.routes, args.inline),
        Command::RawFloor(args) => raw_floor::run(args.listen, args.routes),
    }
}

fn l4_load(args: L4LoadArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let duration = Duration::from_secs(args.duration);
    let totals = runtime.block_on(l4::load(
        args.target,
        args.mode,
        args.concurrency,
        duration,
        args.size,
    ));
    println!(
        "connections={} bytes={} errors={} seconds={:.3}",
        totals.connections,
        totals.bytes,
        totals.errors,
        totals.elapsed.as_secs_f64()
    );
    Ok(())
}

fn h_load(args: HLoadArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let duration = Duration::from_secs(args.duration);
    let totals = runtime.block_on(hload::run(
        args.protocol,
        args.target,
        args.host,
        args.path,
        args.connections,
        duration,
    ));
    let us = totals.elapsed.as_micros();
    println!(
        "RESULT requests={} duration_us={us} errors={}",
        totals.requests, totals.errors
    );
    Ok(())
}

fn balance(args: BalanceArgs) -> anyhow::Result<()> {
    let options = balance::Options {
        portico: args.portico,
        dir: args.dir,
        duration: Duration::from_secs(args.duration),
        concurrency: args.concurrency,
        delay: Duration::from_millis(args.delay_ms),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let table = runtime.block_on(balance::run(options))?;
    print!("{table}");
    Ok(())
}

fn distributed(args: DistributedArgs) -> anyhow::Result<()> {
    let options = distributed::Options {
        portico: args.portico,
        etcd: args.etcd,
        etcdctl: args.etcdctl,
        dir: args.dir,
        sizes: args.sizes,
        changes: args.changes,
        cold_starts: args.cold_starts,
        backends: args.backends,
        phase_budget: Duration::from_secs(args.phase_budget),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let table = runtime.block_on(distributed::run(options))?;
    print!("{table}");
    Ok(())
}

fn generate(args: GenArgs) -> anyhow::Result<()> {
    let (sizes, cycle) = (args.sizes.into(), args.sizes.cycle());
    let layout = Layout::new(sizes, args.backends, cycle).map_err(anyhow::Error::msg)?;
    let layout = layout
        .with_tls(args.sizes.tls_secrets)
        .with_per_file(args.per_file);
    generate::write_all(&args.dir, &layout)
        .with_context(|| format!("writing {}", args.dir.display()))
}

fn haproxy_scale(args: HaproxyScaleArgs) -> anyhow::Result<()> {
    let options = haproxy_scale::Options {
        portico: args.portico,
        dir: args.dir,
        sizes: args.sizes.into(),
        cycle: args.sizes.cycle(),
        changes: args.changes,
        backends: args.backends,
        rate: args.rate,
        phase_budget: Duration::from_secs(args.phase_budget),
        cpu_requests: args.cpu_requests,
        nofile: args.nofile,
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let table = runtime.block_on(haproxy_scale::run(options))?;
    print!("{table}");
    Ok(())
}

fn scale(args: ScaleArgs) -> anyhow::Result<()> {
    let options = run::Options {
        portico: args.portico,
        dir: args.dir,
        sizes: args.sizes.into(),
        cycle: args.sizes.cycle(),
        tls_secrets: args.sizes.tls_secrets,
        changes: args.changes,
        backends: args.backends,
        rate: args.rate,
        nginx: args.nginx,
        reloads: args.reloads,
        phase_budget: Duration::from_secs(args.phase_budget),
        per_file: args.per_file,
        drift_changes: args.drift_changes,
        fake_apiserver: args.fake_apiserver,
        http_routes: args.http_routes,
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let table = runtime.block_on(run::scale(options))?;
    print!("{table}");
    Ok(())
}
