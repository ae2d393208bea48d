//! The settings and results shared by the processes: where a node listens and what it bound.

use std::net::SocketAddr;

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
