//! The offline entry point of the command line: what `validate`, `render` and `migrate`
//! compute from manifest files without serving (the same load, translation and haproxy plan as
//! `run`), and the types the command line fills in, so that it depends on this crate alone.

use crate::types::NodeSettings;
use portico_model::{Diagnostic, Severity};
use portico_provider_haproxy::{Binds, PlanSettings, Planned, plan};
use portico_store::Desired;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An address range of `--trusted-proxies`.
pub use portico_model::Cidr as TrustedCidr;
pub use portico_model::{Compression, Escaped, Hsts, Limits, Tracing};
pub use portico_report::ReportSettings;
pub use portico_source_file::{ReadLimits, load};
pub use portico_store_etcd::{EtcdConfig, TlsFiles};
pub use portico_translate::migrate;
pub use portico_translate::{Cidr, Config, GATEWAY_CONTROLLER_NAME, ObjectKey, error_codes};

pub use crate::compile::compile_once;
pub use crate::source::load_kubernetes_once;

/// The echo backends of `portico demo`.
pub use portico_echo::spawn as spawn_echo;

/// What `portico validate` found.
#[derive(Debug)]
pub struct Validation {
    /// Every diagnostic, sorted, each once.
    pub diagnostics: Vec<Diagnostic>,
    /// How many are errors.
    pub errors: usize,
    /// One line: how many objects were read and served, errors and warnings.
    pub summary: String,
}

/// The haproxy provider's plan settings as `run` would use them, with its default listeners
/// `listeners` (HTTP, HTTPS) when haproxy binds them.
fn plan_settings(
    config: &Config,
    root: PathBuf,
    listeners: (SocketAddr, SocketAddr),
    access_log: Option<PathBuf>,
) -> PlanSettings {
    let default_binds =
        (config.default_provider == portico_provider_haproxy::PROVIDER).then_some(Binds {
            http: Some(listeners.0),
            https: Some(listeners.1),
            transparent: false,
            floating: None,
        });
    PlanSettings {
        root,
        default_binds,
        default_class: config.ingress_class.clone(),
        limits: Limits::default(),
        tcp: Default::default(),
        access_log,
        // What `run` would be given: this process's limit.
        descriptors: portico_provider_haproxy::descriptor_limit(),
    }
}

/// Every load balancer of provider haproxy in `desired`, planned and rendered as `run` would.
fn plan_haproxy(
    desired: &Desired,
    settings: &PlanSettings,
    fallback: &Arc<Vec<u8>>,
) -> (Vec<Planned>, Vec<Diagnostic>) {
    let (model, ca) = (&desired.model, &desired.ca_bundles);
    plan(
        model,
        &desired.certificates,
        ca,
        &desired.credentials,
        settings,
        fallback,
    )
}

/// `portico validate`: the files loaded, compiled and planned for haproxy as `run` would with
/// its default `listeners`; nothing is written.
pub fn validate(
    files: &[PathBuf],
    limits: ReadLimits,
    config: &Config,
    listeners: (SocketAddr, SocketAddr),
) -> Validation {
    let loaded = Arc::new(load(files, limits));
    let compiled = crate::compile::compile_once(loaded, config);
    // The root is only named in messages: validate writes nothing.
    let root = PathBuf::from("state/loadbalancer/haproxy");
    let settings = plan_settings(config, root, listeners, None);
    let (_, planned) = plan_haproxy(&compiled.desired, &settings, &Arc::new(Vec::new()));
    let mut all: Vec<Diagnostic> = compiled.diagnostics().chain(&planned).cloned().collect();
    all.sort();
    all.dedup();
    let errors = all.iter().filter(|d| d.severity == Severity::Error).count();
    let ingresses = &compiled.translation.ingresses;
    let served = ingresses.iter().filter(|i| i.served).count();
    let objects = &compiled.loaded.objects;
    let verdicts = &compiled.translation.gateways;
    let gateway_api = if objects.gateways.is_empty() && objects.http_routes.is_empty() {
        String::new()
    } else {
        format!(
            "{} Gateways ({} of this controller), {} HTTPRoutes ({} with a parent of it), ",
            objects.gateways.len(),
            verdicts.gateways.len(),
            objects.http_routes.len(),
            verdicts.routes.len(),
        )
    };
    let summary = format!(
        "{} Ingresses ({} served by this controller), {gateway_api}{} errors, {} warnings",
        ingresses.len(),
        served,
        errors,
        all.len() - errors
    );
    Validation {
        diagnostics: all,
        errors,
        summary,
    }
}

/// What `portico render` wrote and prints.
#[derive(Debug)]
pub struct Rendered {
    /// The problems found, sorted, each once.
    pub diagnostics: Vec<Diagnostic>,
    /// Each haproxy configuration (its path, its text), its files written.
    pub configs: Vec<(PathBuf, String)>,
}

/// Why `portico render` could not write.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("{0} (--state-dir)")]
    StateDir(#[from] portico_statedir::StateDirError),
    #[error("making the fallback certificate: {0}")]
    Fallback(String),
    #[error("writing the files of {dir}: {reason}")]
    Write { dir: PathBuf, reason: String },
}

/// `portico render`: the same load, translation and certificates as `run`, then the haproxy
/// configuration of every load balancer of provider haproxy; the files each names are written
/// in the node's state directory, locked meanwhile as `run` locks it.
pub fn render(
    files: &[PathBuf],
    limits: ReadLimits,
    config: &Config,
    node: &NodeSettings,
    listeners: (SocketAddr, SocketAddr),
) -> Result<Rendered, RenderError> {
    let state_dir: &Path = &node.state_dir;
    portico_statedir::ensure_private_dir(state_dir)?;
    let _lock = portico_statedir::lock(state_dir)?;
    let loaded = Arc::new(load(files, limits));
    let compiled = crate::compile::compile_once(loaded, config);
    // As `run` with its default access log, but without the process id in the name.
    let access_log = Some(state_dir.join("access-log.sock"));
    let settings = plan_settings(config, node.haproxy_root(), listeners, access_log);
    // The certificate served when no other fits, as `run` makes it.
    let fallback = portico_tls::self_signed(&["portico.invalid"])
        .map_err(|e| RenderError::Fallback(e.to_string()))?;
    let fallback = Arc::new(fallback.pem());
    let (planned, mut diagnostics) = plan_haproxy(&compiled.desired, &settings, &fallback);
    diagnostics.extend(compiled.diagnostics().cloned());
    diagnostics.sort();
    diagnostics.dedup();
    let mut configs = Vec::with_capacity(planned.len());
    for p in &planned {
        // What the configuration names must exist for it to pass `haproxy -c` as printed.
        p.write_files().map_err(|e| RenderError::Write {
            dir: p.dir.clone(),
            reason: e.to_string(),
        })?;
        let path = p.dir.join(portico_provider_haproxy::CONFIG_FILE);
        configs.push((path, p.printable_config()));
    }
    Ok(Rendered {
        diagnostics,
        configs,
    })
}
