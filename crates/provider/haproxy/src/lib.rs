//! The `haproxy` provider — the seed's "opencontrail" driver: for every LoadBalancer whose
//! provider is `haproxy`, a haproxy.conf rendered from the model (a pure function,
//! [`render()`]) under `<state-dir>/loadbalancer/haproxy/<lb-uuid>/` with the certificates and
//! the stats socket beside it, and a real haproxy in master-worker mode that serves it.
//!
//! Every change is checked with `haproxy -c` first; a configuration that fails the check is not
//! applied (the last good one keeps serving and the failure is a diagnostic). Changes reload
//! haproxy without dropping connections (the new worker takes the listening sockets); changes
//! of members' readiness or weight only go through the runtime API. A haproxy that dies is
//! started again with back-off; a load balancer that goes away takes its haproxy and its
//! directory with it.
//!
//! This crate sees the model and certificate material only: no Kubernetes types.

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod cli;
mod files;
mod instance;
mod plan;
mod provider;
pub mod quote;
mod render;
mod runtime;
pub mod servers;
mod status;

pub use instance::Binary;
pub use plan::{PlanSettings, Planned, plan};
pub use provider::{Counters, HaproxyProvider, Settings, StartError, remove_stale, running_under};

pub use render::{
    BAD_GATEWAY_FILE, BAD_GATEWAY_RESPONSE, Binds, CONFIG_FILE, CRT_LIST_FILE, Checks,
    DEFAULT_CERTIFICATE_FILE, Fit, Input, MIN_MAXCONN, Needs, Reduction, Rendered, SPARE_SLOTS,
    STATS_SOCKET, Server, TcpLimits, fit, render, routes,
};

/// The provider type this crate serves.
pub const PROVIDER: &str = "haproxy";

/// The hard limit of open files of this process, which every haproxy it starts inherits and
/// may raise its own soft limit to (`None`: unlimited). Read once, where the provider's
/// settings are made ([`PlanSettings::descriptors`]).
pub fn descriptor_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum
}
