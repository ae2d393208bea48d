//! The admin API: health and readiness, Prometheus metrics, JSON views of Ingress status and
//! diagnostics and of the load-balancer model, and a dashboard (static HTML, CSS and JavaScript
//! built into the binary that reads the JSON API; see docs/dashboard.md).
//!
//! It reads one immutable [`Snapshot`] per configuration generation (swapped atomically by the
//! app) and a metrics registry; it never changes the configuration. It must not depend on
//! Kubernetes types, sources or data planes.

mod assets;
mod routes;
mod server;
mod views;

pub use portico_status::{
    IngressView, LoadBalancerAddress, MemberHealthView, PoolHealthView, ServiceView, Snapshot,
};
pub use server::{Admin, PoolHealthSource, serve};
