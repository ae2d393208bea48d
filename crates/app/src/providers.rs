//! The provider registry of the all-in-one process: the built-in proxy as provider `proxy`,
//! haproxy as provider `haproxy` and the L4 data plane as provider `l4`.

use crate::types::NodeSettings;
use portico_model::Limits;
use portico_provider::Registry;
use portico_provider_haproxy::{Binary, Binds, HaproxyProvider, PlanSettings};
use portico_provider_proxy::ProxyProvider;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// What the haproxy provider is told by the command line (its directory is the node's:
/// [`NodeSettings::haproxy_root`]).
#[derive(Debug, Clone)]
pub struct HaproxySettings {
    /// `--haproxy-bin`.
    pub binary: PathBuf,
}

/// The haproxy provider's settings; `default_binds` when haproxy serves the run's listeners.
pub fn haproxy_plan(
    node: &NodeSettings,
    default_binds: Option<Binds>,
    class: &str,
    limits: Limits,
    access_log: Option<PathBuf>,
) -> PlanSettings {
    PlanSettings {
        access_log,
        limits,
        root: node.haproxy_root(),
        default_binds,
        default_class: class.to_owned(),
        tcp: portico_provider_haproxy::TcpLimits::default(),
        descriptors: portico_provider_haproxy::descriptor_limit(),
    }
}

/// The registry with both providers; the haproxy one is returned too, to be shut down.
pub(crate) fn registry(
    proxy: Arc<ProxyProvider>,
    (node, haproxy): (&NodeSettings, &HaproxySettings),
    default_binds: Option<(SocketAddr, SocketAddr)>,
    listen: &crate::types::ListenSettings,
    access_log: Option<PathBuf>,
    counters: Arc<portico_provider_haproxy::Counters>,
    lock: Arc<portico_statedir::Lock>,
) -> Result<(Registry, Arc<HaproxyProvider>), portico_provider_haproxy::StartError> {
    let binds = default_binds.map(|(http, https)| Binds {
        http: Some(http),
        https: Some(https),
        transparent: false,
        floating: None,
    });
    let mut plan = haproxy_plan(node, binds, &listen.class, listen.limits, access_log);
    // Services served by haproxy keep provider l4's deadlines (`--l4-*`).
    plan.tcp = portico_provider_haproxy::TcpLimits {
        connect_timeout: listen.l4_limits.connect_timeout,
        idle_timeout: listen.l4_limits.idle_timeout,
        tries: listen.l4_limits.tries,
    };
    let provider = HaproxyProvider::new(portico_provider_haproxy::Settings {
        plan,
        binary: Binary {
            haproxy: haproxy.binary.clone(),
        },
        counters,
        lock,
    })?;
    let provider = Arc::new(provider);
    let mut registry = Registry::default();
    let sockets = proxy.sockets();
    registry.register(proxy);
    registry.register(provider.clone());
    let l4 = portico_provider_l4::L4Provider::new(listen.l4_limits, sockets);
    registry.register(Arc::new(l4));
    Ok((registry, provider))
}

/// The built-in proxy's pools and their members' health, as `GET /api/v1/pools` shows them.
pub(crate) fn pool_health(proxy: &ProxyProvider) -> Vec<portico_admin::PoolHealthView> {
    use portico_admin::{MemberHealthView, PoolHealthView};
    use portico_dataplane_http::Health;
    let pools = proxy.pool_health().into_iter();
    pools
        .map(|pool| PoolHealthView {
            id: pool.id.to_string(),
            name: pool.name,
            provider: portico_dataplane_http::PROVIDER.to_owned(),
            members: (pool.members.into_iter())
                .map(|(addr, health)| {
                    let (health, ejected_for_ms) = match health {
                        Health::Healthy => ("healthy", None),
                        Health::Ejected { remaining } => (
                            "ejected",
                            Some(u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX)),
                        ),
                        Health::FailingChecks => ("failing_checks", None),
                    };
                    MemberHealthView {
                        address: addr.to_string(),
                        health: health.to_owned(),
                        ejected_for_ms,
                    }
                })
                .collect(),
        })
        .collect()
}

/// haproxy's pools and their servers' health (servers in maintenance, the members not ready,
/// left out); the admin API fills in the pool names. `down`: failing checks or marked down
/// after errors (haproxy does not tell which).
pub(crate) fn haproxy_pool_health(haproxy: &HaproxyProvider) -> Vec<portico_admin::PoolHealthView> {
    use portico_admin::{MemberHealthView, PoolHealthView};
    let mut pools: std::collections::BTreeMap<String, Vec<MemberHealthView>> = Default::default();
    for s in haproxy.server_states() {
        if s.maintenance {
            continue;
        }
        let health = if s.up { "healthy" } else { "down" };
        pools.entry(s.backend).or_default().push(MemberHealthView {
            address: format!("{}:{}", s.address, s.port),
            health: health.to_owned(),
            ejected_for_ms: None,
        });
    }
    pools
        .into_iter()
        .map(|(id, members)| PoolHealthView {
            id,
            name: String::new(),
            provider: "haproxy".to_owned(),
            members,
        })
        .collect()
}
