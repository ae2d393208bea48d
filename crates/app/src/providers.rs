//! The provider registry of the all-in-one process: the built-in proxy as provider `proxy`
//! and haproxy as provider `haproxy`.

use portico_dataplane_http::Proxy;
use portico_model::{Diagnostic, Limits, Model, PoolId};
use portico_provider::{Certificates, Provider, Registry};
use portico_provider_haproxy::{Binary, Binds, HaproxyProvider, PlanSettings};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The built-in proxy as a provider: compiles the model's `proxy` load balancers into its
/// route table and swaps its certificates.
pub(crate) struct ProxyProvider(pub(crate) Arc<Proxy>);

impl Provider for ProxyProvider {
    fn kind(&self) -> &'static str {
        portico_dataplane_http::PROVIDER
    }

    fn apply(&self, model: &Model, certificates: &Certificates) -> Vec<Diagnostic> {
        self.0.set_certificates(model, certificates);
        self.0.apply(model);
        vec![]
    }

    fn update_members(&self, model: &Model, pools: &HashSet<PoolId>) {
        let all = model.load_balancers.iter().flat_map(|lb| &lb.pools);
        self.0.update_members(all.filter(|p| pools.contains(&p.id)));
    }
}

/// What the haproxy provider is told by the command line.
#[derive(Debug, Clone)]
pub struct HaproxySettings {
    /// `--state-dir`: load balancers live under `<state-dir>/loadbalancer/haproxy/<uuid>/`.
    pub state_dir: PathBuf,
    /// `--haproxy-bin`.
    pub binary: PathBuf,
}

/// `setpriv` from util-linux, when installed: haproxy then dies with Portico.
fn setpriv() -> Option<PathBuf> {
    ["/usr/bin/setpriv", "/bin/setpriv"]
        .iter()
        .map(Path::new)
        .find(|p| p.exists())
        .map(Path::to_path_buf)
}

/// The haproxy provider's settings; `default_binds` when haproxy serves the run's listeners.
pub fn haproxy_plan(
    settings: &HaproxySettings,
    default_binds: Option<Binds>,
    class: &str,
    limits: Limits,
) -> PlanSettings {
    PlanSettings {
        limits,
        root: settings.state_dir.join("loadbalancer").join("haproxy"),
        default_binds,
        default_class: class.to_owned(),
    }
}

/// The registry with both providers; the haproxy one is returned too, to be shut down.
pub(crate) fn registry(
    proxy: Arc<Proxy>,
    haproxy: &HaproxySettings,
    default_binds: Option<(SocketAddr, SocketAddr)>,
    class: &str,
    limits: Limits,
) -> Result<(Registry, Arc<HaproxyProvider>), portico_provider_haproxy::StartError> {
    let binds = default_binds.map(|(http, https)| Binds {
        http: Some(http),
        https: Some(https),
    });
    let provider = HaproxyProvider::new(portico_provider_haproxy::Settings {
        plan: haproxy_plan(haproxy, binds, class, limits),
        binary: Binary {
            haproxy: haproxy.binary.clone(),
            setpriv: setpriv(),
        },
    })?;
    let provider = Arc::new(provider);
    let mut registry = Registry::default();
    registry.register(Arc::new(ProxyProvider(proxy)));
    registry.register(provider.clone());
    Ok((registry, provider))
}
