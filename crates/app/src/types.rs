//! The settings and results shared by the processes: where a node listens and what it bound.

use std::net::SocketAddr;
use std::path::PathBuf;

/// The node's state directory (`--state-dir`) and what lives in it: the process's lock
/// (`portico.lock`, one process at a time), the haproxy provider's load balancers, an agent's
/// cache, the access log's socket and the outcome of an upgrade.
#[derive(Debug, Clone)]
pub struct NodeSettings {
    pub state_dir: PathBuf,
}

impl NodeSettings {
    /// Where the haproxy provider keeps its load balancers:
    /// `<state-dir>/loadbalancer/haproxy/<uuid>/`.
    pub fn haproxy_root(&self) -> PathBuf {
        self.state_dir.join("loadbalancer").join("haproxy")
    }

    /// The cache of the agent of node `node`: the last state it served, served at start until
    /// the store answers.
    pub fn agent_cache(&self, node: &str) -> PathBuf {
        self.state_dir.join("agent").join(format!("{node}.cache"))
    }
}

/// Where a node listens and what serves its default listeners.
#[derive(Debug, Clone)]
pub struct ListenSettings {
    pub http_listen: SocketAddr,
    pub https_listen: SocketAddr,
    pub admin_listen: SocketAddr,
    /// `--admin-host`: names the admin API answers besides IP addresses and localhost.
    pub admin_hosts: Vec<String>,
    /// `--provider haproxy`: haproxy binds the default listeners instead of the built-in proxy.
    pub haproxy_listens: bool,
    /// The IngressClass named in the haproxy provider's messages about the default listeners.
    pub class: String,
    /// Limits against abuse, served the same by every provider.
    pub limits: portico_model::Limits,
    /// Deadlines of provider `l4`.
    pub l4_limits: portico_provider_l4::L4Limits,
    /// Where both providers' access log lines go.
    pub access_log: crate::AccessLogDestination,
}

/// The addresses actually bound (ports may have been 0).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub http: SocketAddr,
    pub https: SocketAddr,
    pub admin: SocketAddr,
}
