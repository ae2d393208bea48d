//! `portico`: the command line. The only crate that uses `anyhow` and that picks the
//! Kubernetes API version for k8s-openapi.

mod alloc;
mod demo;
mod get;
mod limits;
mod migrate;
mod render;
mod upgrade;
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
    /// Log filter, e.g. `info`, `debug`, `portico_app=debug` (also RUST_LOG). rustls logs
    /// only errors unless the filter names it (`rustls=warn`): its warnings are per client.
    #[arg(long, global = true, default_value = "info", env = "PORTICO_LOG")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve Ingresses (and Gateway API Gateways and HTTPRoutes, from files) from manifest
    /// files (watched for changes) or, with --kubernetes, from the Kubernetes API. SIGTERM
    /// drains and stops; SIGUSR2 upgrades in place (see `portico upgrade`).
    Run(Box<RunArgs>),
    /// Print every diagnostic for the manifests; exit 1 if any is an error.
    Validate(ValidateArgs),
    /// Before switching from ingress-nginx: every Ingress's ingress-nginx annotations (and
    /// the controller ConfigMap's keys) with what Portico makes of each — served,
    /// served-differently, ignored or refused — and a summary; exit 0 when everything is
    /// served, 1 otherwise.
    Migrate(migrate::MigrateArgs),
    /// Start echo backends and the three seed Ingress examples, serve them, print curl commands.
    Demo(DemoArgs),
    /// Print the haproxy.conf that `run` would write for every load balancer of provider
    /// haproxy, and write the files it names (certificates, mode 0600; crt-lists; error
    /// pages) under --state-dir, so that it passes `haproxy -c` as printed.
    Render(RenderArgs),
    /// Distributed mode: compile manifest files or the Kubernetes API into the desired state in
    /// etcd (the elected leader among controllers writes); agents serve it.
    Controller(Box<ControllerArgs>),
    /// Distributed mode: serve the desired state in etcd on this node (providers, listeners,
    /// admin API) and report what is served back to the store. SIGTERM drains and stops (an
    /// active agent releases its load balancers); SIGUSR2 upgrades in place, the claims kept
    /// (see `portico upgrade`).
    Agent(Box<AgentArgs>),
    /// List what a running Portico serves (loadbalancers, ingresses, pools, diagnostics) from
    /// its admin API, as a table or as JSON or YAML.
    Get(get::GetArgs),
    /// Upgrade a running `portico run` or `portico agent` without closing a socket: send it
    /// SIGUSR2 (it starts the binary now at its path with its arguments and hands every
    /// listening socket over; an agent also its lease and the claims it holds) and wait for
    /// the outcome; exit 1, saying why, when the old process serves on.
    Upgrade(upgrade::UpgradeArgs),
}

#[derive(Args, Debug, Clone)]
struct StoreArgs {
    /// The etcd cluster: `etcd://HOST:PORT[,HOST:PORT…]`, or `etcds://…` to require TLS.
    /// Credentials never go in the URL: see PORTICO_STORE_USER and PORTICO_STORE_PASSWORD.
    #[arg(long, value_name = "URL")]
    store: String,
    /// Key prefix of everything Portico keeps in etcd.
    #[arg(long, value_name = "PREFIX", default_value = "/portico/")]
    store_prefix: String,
    /// CA certificate (PEM) that signed the etcd members' certificates; turns TLS on.
    #[arg(long, value_name = "PATH")]
    store_ca: Option<PathBuf>,
    /// Client certificate (PEM) for etcd's client-certificate authentication.
    #[arg(long, value_name = "PATH", requires = "store_key")]
    store_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM). Protect it like a Secret.
    #[arg(long, value_name = "PATH", requires = "store_cert")]
    store_key: Option<PathBuf>,
    /// etcd user name (etcd's user/password authentication).
    #[arg(
        long,
        value_name = "USER",
        env = "PORTICO_STORE_USER",
        hide_env_values = true
    )]
    store_user: Option<String>,
}

impl StoreArgs {
    fn config(&self) -> anyhow::Result<portico_app::offline::EtcdConfig> {
        let mut config = portico_app::offline::EtcdConfig::parse(&self.store)
            .map_err(|e| anyhow::anyhow!("--store: {e}"))?;
        config.prefix = self.store_prefix.clone();
        config.tls = self
            .store_ca
            .as_ref()
            .map(|ca| portico_app::offline::TlsFiles {
                ca: ca.clone(),
                cert: self.store_cert.clone(),
                key: self.store_key.clone(),
            });
        config.user = self.store_user.clone();
        config.password = std::env::var("PORTICO_STORE_PASSWORD")
            .ok()
            .filter(|p| !p.is_empty());
        config
            .validate()
            .map_err(|e| anyhow::anyhow!("--store: {e}"))?;
        Ok(config)
    }
}

#[derive(Args, Debug)]
struct ControllerArgs {
    /// Manifest file or directory (YAML or JSON, multi-document; directories recursively).
    #[arg(short = 'f', long = "filename", required_unless_present = "kubernetes")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    manifests: ManifestArgs,
    #[command(flatten)]
    kube: KubeArgs,
    #[command(flatten)]
    store: StoreArgs,
    /// Address of the controller's admin API (Ingress status, diagnostics, the agents'
    /// feedback). Loopback by default.
    #[arg(long, default_value = "127.0.0.1:9181")]
    admin_listen: SocketAddr,
    #[command(flatten)]
    admin_hosts: AdminHostArgs,
    /// Address written to Ingress status.loadBalancer.ingress (IP or hostname).
    #[arg(long)]
    publish_address: Option<String>,
    #[command(flatten)]
    class: ClassArgs,
    #[command(flatten)]
    tls: TlsArgs,
}

#[derive(Args, Debug)]
struct AgentArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// This node's name: the agent's key in the store and its name in the controller's view.
    #[arg(long, value_name = "NAME")]
    node: String,
    /// This node's zone: the controller places a load balancer's active and standby agents in
    /// different zones when it can.
    #[arg(long, value_name = "ZONE")]
    zone: Option<String>,
    /// A label of this agent (repeatable), published with its registration.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label)]
    labels: Vec<(String, String)>,
    /// Lifetime of the agent's registration in the store after it stops renewing it (a killed
    /// agent's load balancers are placed elsewhere after this long).
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = seconds)]
    lease_ttl: std::time::Duration,
    #[command(flatten)]
    node_flags: NodeArgs,
    #[command(flatten)]
    provider: ProviderArgs,
    #[command(flatten)]
    haproxy: HaproxyArgs,
    #[command(flatten)]
    ha: HaArgs,
    #[command(flatten)]
    upgrade: UpgradeFlags,
}

/// Active-standby of the load balancers placed on this agent.
#[derive(Args, Debug, Clone)]
struct HaArgs {
    /// Interface where this agent adds the addresses (VIP, floating IP) of the load balancers
    /// it is active for, and sends gratuitous ARP. Without it, active-standby is off.
    #[arg(long, value_name = "IFACE", requires = "advertise_address")]
    interface: Option<String>,
    /// This agent's own address for its peer's heartbeats (UDP), published in the store.
    #[arg(long, value_name = "IP")]
    advertise_address: Option<std::net::IpAddr>,
    /// UDP port of the heartbeats (the same on every agent).
    #[arg(long, value_name = "PORT", default_value_t = 9182)]
    heartbeat_port: u16,
    /// Milliseconds between adverts; the standby takes over after 3 missed plus one interval.
    #[arg(long, value_name = "MS", default_value_t = 50, value_parser = clap::value_parser!(u64).range(5..=10_000))]
    advert_interval: u64,
}

impl HaArgs {
    fn settings(&self) -> Option<portico_app::HaSettings> {
        let interval = std::time::Duration::from_millis(self.advert_interval);
        let timing = portico_app::HaTiming {
            interval,
            skew: interval,
            ..portico_app::HaTiming::default()
        };
        Some(portico_app::HaSettings {
            interface: self.interface.clone()?,
            advertise_address: self.advertise_address?,
            heartbeat_port: self.heartbeat_port,
            timing,
        })
    }
}

/// The default class and provider: of what a controller compiles (`run`, `controller`,
/// `validate`, `render`), and of the listeners a node binds (`run`, `agent`).
#[derive(Args, Debug, Clone)]
struct ProviderArgs {
    /// IngressClass this process owns besides those whose spec.controller is
    /// `portico.dev/ingress-controller` (an agent owns none: it names it in messages about its
    /// default listeners).
    #[arg(long, default_value = "portico")]
    ingress_class: String,
    /// Provider for load balancers whose IngressClass has no `portico.dev/provider` annotation,
    /// and of the default listeners: `proxy` (the built-in proxy) or `haproxy` (a generated
    /// haproxy.conf and a real haproxy per load balancer, which then binds --http-listen and
    /// --https-listen itself). An agent serves the providers the controller chose; its own
    /// only says which binds its listeners.
    #[arg(long, default_value = "proxy", value_parser = ["proxy", "haproxy"])]
    provider: String,
}

impl ProviderArgs {
    /// Whether haproxy binds the default listeners.
    fn haproxy_listens(&self) -> bool {
        self.provider == "haproxy"
    }
}

#[derive(Args, Debug, Clone)]
struct ClassArgs {
    #[command(flatten)]
    provider: ProviderArgs,
    /// GatewayClasses whose spec.controllerName is this are Portico's: their Gateways, and the
    /// HTTPRoutes attached to those, are served and get a status.
    #[arg(long, value_name = "NAME", default_value = portico_app::offline::GATEWAY_CONTROLLER_NAME)]
    gateway_controller_name: String,
    /// Pool of load balancers' VIPs (a CIDR prefix such as 198.18.0.0/24): each load balancer
    /// without a `portico.dev/vip` gets the lowest free address, and keeps it. An IngressClass
    /// may name its own with the `portico.dev/vip-pool` annotation.
    #[arg(long, value_name = "CIDR", value_parser = cidr)]
    vip_pool: Option<portico_app::offline::Cidr>,
    /// Pool of load balancers' floating IPs (external addresses), like --vip-pool; an
    /// IngressClass may name its own (`portico.dev/fip-pool`), an Ingress of a dedicated class
    /// may pin one (`portico.dev/external-ip`).
    #[arg(long, value_name = "CIDR", value_parser = cidr)]
    fip_pool: Option<portico_app::offline::Cidr>,
    /// Serve every Service of type LoadBalancer without `spec.loadBalancerClass` with provider
    /// `l4` too (those of class `portico.dev/l4` always are).
    #[arg(long)]
    l4_all_services: bool,
    /// Service (NAMESPACE/NAME; its first port) that answers requests no Ingress rule matches,
    /// in place of Portico's own 404, and serves the `custom-http-errors` pages of Ingresses
    /// without a `default-backend` annotation, as ingress-nginx's flag of the same name.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = namespaced_name)]
    default_backend_service: Option<portico_app::offline::ObjectKey>,
    /// Status codes (`404,503`: 400 to 599) whose answers --default-backend-service replaces
    /// with its page (the `X-Code` headers and the rest, as the `custom-http-errors`
    /// annotation) for every Ingress without a `custom-http-errors` of its own: ingress-nginx's
    /// ConfigMap key of that name.
    #[arg(long, value_name = "CODES", value_parser = error_codes, requires = "default_backend_service")]
    custom_http_errors: Option<ErrorCodes>,
}

/// The codes of `--custom-http-errors`.
#[derive(Debug, Clone)]
struct ErrorCodes(Vec<u16>);

fn error_codes(value: &str) -> Result<ErrorCodes, String> {
    portico_app::offline::error_codes(value).map(ErrorCodes)
}

fn cidr(value: &str) -> Result<portico_app::offline::Cidr, String> {
    value.parse()
}

/// `key=value` of `--label`.
fn label(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
        _ => Err(format!("{value:?} is not key=value")),
    }
}

/// A duration in whole seconds, at least 1.
fn seconds(value: &str) -> Result<std::time::Duration, String> {
    match value.parse::<u64>() {
        Ok(s) if s >= 1 => Ok(std::time::Duration::from_secs(s)),
        _ => Err(format!("{value:?} is not a number of seconds (1 or more)")),
    }
}

/// The node's state directory.
#[derive(Args, Debug, Clone)]
pub(crate) struct StateDirArgs {
    /// The node's state directory: `DIR/loadbalancer/haproxy/<lb-uuid>/` holds each load
    /// balancer's haproxy.conf, certificate PEMs (mode 0600) and stats socket (provider
    /// haproxy), `DIR/agent/` an agent's cache; the access log's socket and an upgrade's
    /// outcome are there too. One process at a time: a second one given the same directory
    /// exits, naming the PID in `DIR/portico.lock`. Default: $XDG_RUNTIME_DIR/portico, else
    /// $XDG_STATE_HOME/portico, else ~/.local/state/portico.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

impl StateDirArgs {
    pub(crate) fn settings(&self) -> anyhow::Result<portico_app::NodeSettings> {
        let dir = match &self.state_dir {
            Some(dir) => dir.clone(),
            None => default_state_dir()
                .context("no default state directory (HOME is not set): pass --state-dir")?,
        };
        let dir =
            std::path::absolute(&dir).with_context(|| format!("--state-dir {}", dir.display()))?;
        Ok(portico_app::NodeSettings { state_dir: dir })
    }
}

#[derive(Args, Debug, Clone)]
pub(crate) struct HaproxyArgs {
    #[command(flatten)]
    pub(crate) state: StateDirArgs,
    /// The haproxy executable (provider haproxy; haproxy 2.6 or later).
    #[arg(long, value_name = "PATH", default_value = "haproxy")]
    haproxy_bin: PathBuf,
}

impl HaproxyArgs {
    pub(crate) fn settings(&self) -> portico_app::HaproxySettings {
        portico_app::HaproxySettings {
            binary: self.haproxy_bin.clone(),
        }
    }
}

/// `$XDG_RUNTIME_DIR/portico`, else `$XDG_STATE_HOME/portico`, else `~/.local/state/portico`.
fn default_state_dir() -> Option<PathBuf> {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("XDG_RUNTIME_DIR")
        .or_else(|| var("XDG_STATE_HOME"))
        .or_else(|| var("HOME").map(|h| h.join(".local/state")))
        .map(|d| d.join("portico"))
}

#[derive(Args, Debug, Clone)]
struct TlsArgs {
    /// Secret (`kubernetes.io/tls`) whose certificate TLS handshakes get when no `spec.tls`
    /// host matches their SNI (or they send none); default: a self-signed certificate made
    /// at start.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = namespaced_name)]
    default_certificate: Option<portico_app::offline::ObjectKey>,
}

/// `--access-log`: `stdout`, `off` or a file path.
fn access_log(value: &str) -> Result<portico_app::AccessLogDestination, String> {
    use portico_app::AccessLogDestination::{File, Off, Stdout};
    match value {
        "" => Err("expected stdout, off or a file path".to_owned()),
        "stdout" => Ok(Stdout),
        "off" => Ok(Off),
        path => Ok(File(PathBuf::from(path))),
    }
}

/// `NAMESPACE/NAME`, both parts non-empty.
fn namespaced_name(value: &str) -> Result<portico_app::offline::ObjectKey, String> {
    match value.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(portico_app::offline::ObjectKey::new(ns, name))
        }
        _ => Err(format!("expected NAMESPACE/NAME, got \"{value}\"")),
    }
}

/// `--http-listen`'s default.
const DEFAULT_HTTP_LISTEN: &str = "127.0.0.1:8080";
/// `--https-listen`'s default.
const DEFAULT_HTTPS_LISTEN: &str = "127.0.0.1:8443";

/// The flags of a node that serves traffic (`run`, `agent`, `demo`): its listeners, admin
/// API, threads, limits and access log.
#[derive(Args, Debug, Clone)]
struct NodeArgs {
    /// Address of the HTTP listener (of the load balancers without a VIP).
    #[arg(long, default_value = DEFAULT_HTTP_LISTEN)]
    http_listen: SocketAddr,
    /// Address of the HTTPS listener (of the load balancers without a VIP; TLS termination,
    /// certificates from the Secrets named in Ingress spec.tls, chosen by SNI).
    #[arg(long, default_value = DEFAULT_HTTPS_LISTEN)]
    https_listen: SocketAddr,
    /// Address of the admin API (health, metrics, JSON, dashboard; /readyz is 200 once the
    /// first state is served). Loopback by default.
    #[arg(long, default_value = "127.0.0.1:9180")]
    admin_listen: SocketAddr,
    #[command(flatten)]
    admin_hosts: AdminHostArgs,
    /// Threads that serve traffic (and the control plane); 0 means one per CPU core.
    /// 1 runs everything on a single thread, like nginx's `worker_processes 1`.
    #[arg(long, default_value_t = 0)]
    workers: usize,
    #[command(flatten)]
    limits: limits::LimitArgs,
    /// Access log of both providers, one JSON line per request: `stdout`, `off`, or a file
    /// path (appended to).
    #[arg(long, value_name = "stdout|off|PATH", default_value = "stdout", value_parser = access_log)]
    access_log: portico_app::AccessLogDestination,
}

impl NodeArgs {
    /// Where the node listens; `provider` says which provider binds the default listeners.
    fn listen(&self, provider: &ProviderArgs) -> portico_app::ListenSettings {
        portico_app::ListenSettings {
            http_listen: self.http_listen,
            https_listen: self.https_listen,
            admin_listen: self.admin_listen,
            admin_hosts: self.admin_hosts.names.clone(),
            haproxy_listens: provider.haproxy_listens(),
            class: provider.ingress_class.clone(),
            limits: self.limits.limits(),
            l4_limits: self.limits.l4_limits(),
            access_log: self.access_log.clone(),
        }
    }
}

/// `run`'s and `demo`'s listeners, and the address their Ingress status shows.
#[derive(Args, Debug, Clone)]
struct ListenArgs {
    #[command(flatten)]
    node: NodeArgs,
    /// Address written to Ingress status.loadBalancer.ingress (IP or hostname);
    /// default: the IP of --http-listen (none when that is 0.0.0.0 or ::).
    #[arg(long)]
    publish_address: Option<String>,
}

/// Where the Kubernetes API is and what of it to read.
#[derive(Args, Debug, Clone)]
struct KubeSourceArgs {
    /// Read Ingresses, IngressClasses, Services, EndpointSlices, Secrets and (where the cluster
    /// has their CRDs) the Gateway API's GatewayClasses, Gateways, HTTPRoutes and
    /// ReferenceGrants from the Kubernetes API instead of manifest files (`run` and
    /// `controller`: and write Ingress, Service and Gateway API status and Events, leader only).
    #[arg(long, conflicts_with = "files")]
    kubernetes: bool,
    /// Kubeconfig file; default: KUBECONFIG, ~/.kube/config, then the in-cluster service
    /// account.
    #[arg(long, value_name = "PATH", requires = "kubernetes")]
    kubeconfig: Option<PathBuf>,
    /// Watch only this namespace (IngressClasses are cluster-wide).
    #[arg(long, value_name = "NAMESPACE", requires = "kubernetes")]
    namespace: Option<String>,
}

#[derive(Args, Debug, Clone)]
struct KubeArgs {
    #[command(flatten)]
    source: KubeSourceArgs,
    /// Service (type LoadBalancer) whose load-balancer addresses Ingress status shows, instead
    /// of --publish-address.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = namespaced_name, requires = "kubernetes")]
    publish_service: Option<portico_app::offline::ObjectKey>,
    /// Namespace of the leader-election Lease.
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "POD_NAMESPACE",
        default_value = "default"
    )]
    election_namespace: String,
    /// Name of the leader-election Lease (coordination.k8s.io/v1): one replica, its holder,
    /// writes status and Events; every replica serves traffic.
    #[arg(long, value_name = "NAME", default_value = "portico-leader")]
    election_id: String,
    /// This replica's name in the Lease and in Events; default: HOSTNAME-PID.
    #[arg(long, value_name = "ID", env = "POD_NAME")]
    identity: Option<String>,
}

impl KubeArgs {
    fn settings(&self) -> Option<portico_app::KubeSettings> {
        if !self.source.kubernetes {
            return None;
        }
        let identity = self.identity.clone().unwrap_or_else(default_identity);
        let mut report =
            portico_app::offline::ReportSettings::new(identity, self.election_namespace.clone());
        report.lease_name = self.election_id.clone();
        Some(portico_app::KubeSettings {
            kubeconfig: self.source.kubeconfig.clone(),
            namespace: self.source.namespace.clone(),
            publish_service: self.publish_service.clone(),
            report,
        })
    }
}

/// `HOSTNAME-PID`: unique among replicas on one node and across nodes.
fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "portico".to_owned());
    format!("{host}-{}", std::process::id())
}

/// Names the admin API answers besides IP addresses and localhost.
#[derive(Args, Debug, Clone, Default)]
struct AdminHostArgs {
    /// A `Host` name the admin API also answers (repeatable); others get 421, so that a web
    /// page cannot read the API through a DNS name rebound to this address.
    #[arg(long = "admin-host", value_name = "NAME")]
    names: Vec<String>,
}

/// Bounds on manifest files.
#[derive(Args, Debug, Clone, Copy)]
struct ManifestArgs {
    /// Largest manifest file read, in bytes; a larger file is reported and the objects it held
    /// before stay served.
    #[arg(long, value_name = "BYTES", default_value_t = portico_app::offline::ReadLimits::DEFAULT_MAX_FILE_BYTES)]
    max_manifest_bytes: u64,
}

impl ManifestArgs {
    fn limits(self) -> portico_app::offline::ReadLimits {
        portico_app::offline::ReadLimits {
            max_file_bytes: self.max_manifest_bytes,
        }
    }
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Manifest file or directory (YAML or JSON, multi-document; directories recursively).
    #[arg(short = 'f', long = "filename", required_unless_present = "kubernetes")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    manifests: ManifestArgs,
    #[command(flatten)]
    kube: KubeArgs,
    #[command(flatten)]
    listen: ListenArgs,
    #[command(flatten)]
    class: ClassArgs,
    #[command(flatten)]
    tls: TlsArgs,
    #[command(flatten)]
    haproxy: HaproxyArgs,
    #[command(flatten)]
    upgrade: UpgradeFlags,
}

/// How `run` and `agent` start beside a running Portico.
#[derive(Args, Debug, Clone)]
struct UpgradeFlags {
    /// When another Portico holds --state-dir, take its listening sockets, its haproxy
    /// masters and (agent) its claims over its hand-over socket, as a SIGUSR2 upgrade does;
    /// it then drains and exits. For a new pod beside the old one (a DaemonSet with
    /// maxSurge). Without it, such a start is refused; with the directory free, it starts.
    /// A process with it that hands over (closing everything) waits for SIGTERM to exit, so
    /// that its container is not restarted.
    #[arg(long)]
    take_over: bool,
}

#[derive(Args, Debug)]
struct ValidateArgs {
    /// Manifest file or directory (YAML or JSON, multi-document; directories recursively).
    #[arg(short = 'f', long = "filename", required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    manifests: ManifestArgs,
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

#[derive(Args, Debug)]
struct RenderArgs {
    /// Manifest file or directory (YAML or JSON, multi-document; directories recursively).
    #[arg(short = 'f', long = "filename", required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    manifests: ManifestArgs,
    #[command(flatten)]
    class: ClassArgs,
    #[command(flatten)]
    tls: TlsArgs,
    #[command(flatten)]
    haproxy: HaproxyArgs,
    /// The HTTP listener haproxy binds with --provider haproxy.
    #[arg(long, default_value = DEFAULT_HTTP_LISTEN)]
    http_listen: SocketAddr,
    /// The HTTPS listener haproxy binds with --provider haproxy.
    #[arg(long, default_value = DEFAULT_HTTPS_LISTEN)]
    https_listen: SocketAddr,
}

fn translate_config(class: &ClassArgs, tls: &TlsArgs) -> portico_app::offline::Config {
    portico_app::offline::Config {
        ingress_class: class.provider.ingress_class.clone(),
        gateway_controller: class.gateway_controller_name.clone(),
        default_provider: class.provider.provider.clone(),
        default_certificate: tls.default_certificate.clone(),
        vip_pool: class.vip_pool,
        fip_pool: class.fip_pool,
        l4_all_services: class.l4_all_services,
        default_backend: class.default_backend_service.clone(),
        custom_errors: (class.custom_http_errors.clone()).map_or_else(Vec::new, |c| c.0),
        ..portico_app::offline::Config::default()
    }
}

fn settings(
    source: portico_app::SourceSettings,
    listen: &ListenArgs,
    class: &ClassArgs,
    tls: &TlsArgs,
    haproxy: &HaproxyArgs,
) -> anyhow::Result<portico_app::Settings> {
    Ok(portico_app::Settings {
        source,
        listen: listen.node.listen(&class.provider),
        publish_address: listen.publish_address.clone(),
        translate: translate_config(class, tls),
        state: haproxy.state.settings()?,
        haproxy: haproxy.settings(),
        upgrade: None,
    })
}

/// How a successor is started on SIGUSR2: the program as this process was named (argv\[0\],
/// resolved like a shell would when it has no slash) and the same arguments.
fn upgrade_command(flags: &UpgradeFlags) -> portico_app::handover::Command {
    let mut args = std::env::args_os();
    let program = args.next().unwrap_or_else(|| "portico".into());
    portico_app::handover::Command {
        program: program.into(),
        args: args.collect(),
        take_over: flags.take_over,
    }
}

fn main() -> ExitCode {
    alloc::configure();
    alloc::start_purging();
    portico_app::trim::set_trim(alloc::collect_thread);
    let cli = Cli::parse();
    init_logging(&cli.log);
    raise_open_files();
    let result = match cli.command {
        Command::Validate(args) => validate::run(
            &args.files,
            args.manifests.limits(),
            &translate_config(&args.class, &args.tls),
        ),
        Command::Run(args) => runtime(args.listen.node.workers).and_then(|rt| {
            let (listen, class, tls, haproxy) =
                (&args.listen, &args.class, &args.tls, &args.haproxy);
            let source = match args.kube.settings() {
                Some(kube) => portico_app::SourceSettings::Kubernetes(Box::new(kube)),
                None => {
                    portico_app::SourceSettings::Files(args.files.clone(), args.manifests.limits())
                }
            };
            let mut settings = settings(source, listen, class, tls, haproxy)?;
            settings.upgrade = Some(upgrade_command(&args.upgrade));
            rt.block_on(serve(settings, None))
        }),
        Command::Render(args) => render::run(&args),
        Command::Migrate(args) => migrate::run(&args),
        Command::Controller(args) => runtime(0).and_then(|rt| rt.block_on(controller(*args))),
        Command::Agent(args) => {
            runtime(args.node_flags.workers).and_then(|rt| rt.block_on(agent(*args)))
        }
        Command::Get(args) => runtime(1).and_then(|rt| rt.block_on(get::run(&args))),
        Command::Upgrade(args) => upgrade::run(&args),
        Command::Demo(args) => {
            runtime(args.listen.node.workers).and_then(|rt| rt.block_on(demo::run(&args.listen)))
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("portico: error: {}", describe(&e));
            ExitCode::from(2)
        }
    }
}

/// Raises the soft limit of open files to the hard one, as servers do: the built-in proxy
/// holds a descriptor per client and upstream connection, and the soft limit is often far
/// below the hard one (1024). Never above the hard limit, which is what Portico is given
/// (haproxy inherits both and fits its needs to the hard one).
fn raise_open_files() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let Some(hard) = limit.maximum.filter(|h| limit.current < Some(*h)) else {
        return;
    };
    let raised = Rlimit {
        current: Some(hard),
        maximum: Some(hard),
    };
    if let Err(error) = setrlimit(Resource::Nofile, raised) {
        tracing::warn!(%error, hard, "cannot raise the soft limit of open files to the hard one");
    }
}

/// The error and its causes, each said once: a cause whose text an outer message already
/// quotes (many errors include their source) is not repeated.
fn describe(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    portico_app::offline::Escaped(&out).to_string()
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
    builder.on_thread_park(alloc::on_park);
    builder.enable_all().build().context("starting the runtime")
}

fn init_logging(filter: &str) {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| filter.to_owned());
    let filter = quiet_libraries(&filter);
    let env = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(env)
        .with_writer(std::io::stderr)
        .init();
}

/// `filter` with rustls's own log at `error` unless it names rustls: rustls warns about each
/// client that misbehaves in a handshake (an IP address sent as SNI, which many clients do), a
/// line per connection that any client can cause. Failed handshakes are Portico's own `debug`
/// lines.
fn quiet_libraries(filter: &str) -> String {
    // A directive's target is what comes before `=` or `[`; `rustls::…` names rustls too,
    // `tokio_rustls` does not.
    let names_rustls = filter.split(',').any(|directive| {
        let target = directive
            .split(['=', '['])
            .next()
            .unwrap_or_default()
            .trim();
        target == "rustls" || target.starts_with("rustls::")
    });
    if names_rustls {
        filter.to_owned()
    } else {
        format!("{filter},rustls=error")
    }
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
    let take_over = settings.upgrade.as_ref().is_some_and(|u| u.take_over);
    let signalled = rx.clone();
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
    linger_after_hand_over(take_over, signalled).await;
    Ok(ExitCode::SUCCESS)
}

/// With `--take-over`, a process that handed everything over (and closed it all) stays until
/// SIGTERM: it runs in a pod (a DaemonSet's), whose container, exiting, would be restarted and
/// take the sockets back; Kubernetes deletes the pod once its successor's is ready. (In a
/// container, the first process exiting also ends a SIGUSR2 successor.)
async fn linger_after_hand_over(
    take_over: bool,
    mut signalled: tokio::sync::watch::Receiver<bool>,
) {
    if take_over && !*signalled.borrow() {
        tracing::info!("handed over and drained; --take-over: waiting for SIGTERM to exit");
        let _ = signalled.wait_for(|s| *s).await;
    }
}

/// `portico controller`: prints the admin API's address once bound.
async fn controller(args: ControllerArgs) -> anyhow::Result<ExitCode> {
    let source = match args.kube.settings() {
        Some(kube) => portico_app::SourceSettings::Kubernetes(Box::new(kube)),
        None => portico_app::SourceSettings::Files(args.files.clone(), args.manifests.limits()),
    };
    let identity = args.kube.identity.clone().unwrap_or_else(default_identity);
    let settings = portico_app::ControllerSettings {
        source,
        store: args.store.config()?,
        admin_listen: args.admin_listen,
        admin_hosts: args.admin_hosts.names.clone(),
        identity,
        translate: translate_config(&args.class, &args.tls),
        publish_address: args.publish_address.clone(),
    };
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        let _ = tx.send(true);
    });
    portico_app::controller(settings, rx, |admin| {
        println!("portico: controller, admin API on {admin}");
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// `portico agent`: prints the bound addresses once bound.
async fn agent(args: AgentArgs) -> anyhow::Result<ExitCode> {
    let settings = portico_app::AgentSettings {
        store: args.store.config()?,
        node: args.node.clone(),
        zone: args.zone.clone(),
        labels: args.labels.iter().cloned().collect(),
        lease_ttl: args.lease_ttl,
        listen: args.node_flags.listen(&args.provider),
        state: args.haproxy.state.settings()?,
        haproxy: args.haproxy.settings(),
        ha: args.ha.settings(),
        upgrade: Some(upgrade_command(&args.upgrade)),
    };
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        let _ = tx.send(true);
    });
    let signalled = rx.clone();
    portico_app::agent(settings, rx, |bound| {
        println!(
            "portico: agent {}, serving HTTP on {}, HTTPS on {} and the admin API on {}",
            args.node, bound.http, bound.https, bound.admin
        );
    })
    .await?;
    linger_after_hand_over(args.upgrade.take_over, signalled).await;
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

#[cfg(test)]
mod tests {
    use super::quiet_libraries;

    #[test]
    fn rustls_logs_errors_only_unless_the_filter_names_it() {
        assert_eq!(quiet_libraries("info"), "info,rustls=error");
        assert_eq!(
            quiet_libraries("warn,portico_app=debug"),
            "warn,portico_app=debug,rustls=error"
        );
        assert_eq!(quiet_libraries("info,rustls=warn"), "info,rustls=warn");
        assert_eq!(
            quiet_libraries("rustls::server=debug"),
            "rustls::server=debug"
        );
        assert_eq!(
            quiet_libraries("info,tokio_rustls=debug"),
            "info,tokio_rustls=debug,rustls=error"
        );
        // The result is a filter tracing accepts.
        assert!(tracing_subscriber::EnvFilter::try_new(quiet_libraries("debug")).is_ok());
    }
}
