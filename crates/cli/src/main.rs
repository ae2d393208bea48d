//! `portico`: the command line. The only crate that uses `anyhow` and that picks the
//! Kubernetes API version for k8s-openapi.

mod alloc;
mod demo;
mod validate;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "portico",
    version,
    about = "Kubernetes Ingress controller and load balancer"
)]
struct Cli {
    /// Log filter, e.g. `info`, `debug`, `portico_app=debug` (also RUST_LOG).
    #[arg(long, global = true, default_value = "info", env = "PORTICO_LOG")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve Ingresses from manifest files (watched for changes) with the built-in proxy.
    Run(RunArgs),
    /// Print every diagnostic for the manifests; exit 1 if any is an error.
    Validate(ValidateArgs),
    /// Start echo backends and the three seed Ingress examples, serve them, print curl commands.
    Demo(DemoArgs),
}

#[derive(Args, Debug, Clone)]
struct ClassArgs {
    /// IngressClass this process owns besides those whose spec.controller is
    /// `portico.dev/ingress-controller`.
    #[arg(long, default_value = "portico")]
    ingress_class: String,
    /// Provider for load balancers whose IngressClass has no `portico.dev/provider` annotation.
    #[arg(long, default_value = "proxy", value_parser = ["proxy"])]
    provider: String,
}

#[derive(Args, Debug, Clone)]
struct TlsArgs {
    /// Secret (`kubernetes.io/tls`) whose certificate TLS handshakes get when no `spec.tls`
    /// host matches their SNI (or they send none); default: a self-signed certificate made
    /// at start.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = secret_name)]
    default_certificate: Option<portico_translate::ObjectKey>,
}

/// `NAMESPACE/NAME`, both parts non-empty.
fn secret_name(value: &str) -> Result<portico_translate::ObjectKey, String> {
    match value.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(portico_translate::ObjectKey::new(ns, name))
        }
        _ => Err(format!("expected NAMESPACE/NAME, got \"{value}\"")),
    }
}

#[derive(Args, Debug, Clone)]
struct ListenArgs {
    /// Address of the HTTP listener.
    #[arg(long, default_value = "127.0.0.1:8080")]
    http_listen: SocketAddr,
    /// Address of the HTTPS listener (TLS termination; certificates from the Secrets named in
    /// Ingress spec.tls, chosen by SNI).
    #[arg(long, default_value = "127.0.0.1:8443")]
    https_listen: SocketAddr,
    /// Address of the admin API (health, metrics, JSON, dashboard). Loopback by default.
    #[arg(long, default_value = "127.0.0.1:9180")]
    admin_listen: SocketAddr,
    /// Address written to Ingress status.loadBalancer.ingress (IP or hostname);
    /// default: the IP of --http-listen.
    #[arg(long)]
    publish_address: Option<String>,
    /// Threads that serve traffic (and the control plane); 0 means one per CPU core.
    /// 1 runs everything on a single thread, like nginx's `worker_processes 1`.
    #[arg(long, default_value_t = 0)]
    workers: usize,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Manifest file or directory (YAML or JSON, multi-document; directories recursively).
    #[arg(short = 'f', long = "filename", required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    listen: ListenArgs,
    #[command(flatten)]
    class: ClassArgs,
    #[command(flatten)]
    tls: TlsArgs,
}

#[derive(Args, Debug)]
struct ValidateArgs {
    /// Manifest file or directory (YAML or JSON, multi-document; directories recursively).
    #[arg(short = 'f', long = "filename", required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    class: ClassArgs,
    #[command(flatten)]
    tls: TlsArgs,
}

#[derive(Args, Debug)]
struct DemoArgs {
    #[command(flatten)]
    listen: ListenArgs,
}

fn translate_config(class: &ClassArgs, tls: &TlsArgs) -> portico_translate::Config {
    portico_translate::Config {
        ingress_class: class.ingress_class.clone(),
        default_provider: class.provider.clone(),
        default_certificate: tls.default_certificate.clone(),
        ..portico_translate::Config::default()
    }
}

fn settings(
    files: Vec<PathBuf>,
    listen: &ListenArgs,
    class: &ClassArgs,
    tls: &TlsArgs,
) -> portico_app::Settings {
    portico_app::Settings {
        manifests: files,
        http_listen: listen.http_listen,
        https_listen: listen.https_listen,
        admin_listen: listen.admin_listen,
        publish_address: listen.publish_address.clone(),
        translate: translate_config(class, tls),
    }
}

fn main() -> ExitCode {
    alloc::configure();
    let cli = Cli::parse();
    init_logging(&cli.log);
    let result = match cli.command {
        Command::Validate(args) => {
            validate::run(&args.files, &translate_config(&args.class, &args.tls))
        }
        Command::Run(args) => runtime(args.listen.workers).and_then(|rt| {
            let settings = settings(args.files, &args.listen, &args.class, &args.tls);
            rt.block_on(serve(settings, None))
        }),
        Command::Demo(args) => {
            runtime(args.listen.workers).and_then(|rt| rt.block_on(demo::run(&args.listen)))
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("portico: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// One worker: a current-thread runtime (no work stealing, no cross-thread wake-ups);
/// otherwise a multi-thread runtime with `workers` threads (0: one per core).
fn runtime(workers: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = match workers {
        1 => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    if workers > 1 {
        builder.worker_threads(workers);
    }
    builder.enable_all().build().context("starting the runtime")
}

fn init_logging(filter: &str) {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| filter.to_owned());
    let env = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(env)
        .with_writer(std::io::stderr)
        .init();
}

/// Runs the pipeline until SIGINT or SIGTERM; prints the bound addresses on stdout.
async fn serve(
    settings: portico_app::Settings,
    banner: Option<String>,
) -> anyhow::Result<ExitCode> {
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        let _ = tx.send(true);
    });
    portico_app::run(settings, rx, |bound| {
        println!(
            "portico: serving HTTP on {}, HTTPS on {} and the admin API on {}",
            bound.http, bound.https, bound.admin
        );
        if let Some(text) = banner {
            println!(
                "{}",
                text.replace("{http}", &bound.http.to_string())
                    .replace("{https}", &bound.https.to_string())
                    .replace("{admin}", &bound.admin.to_string())
            );
        }
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
