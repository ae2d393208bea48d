//! The built-in L7 proxy (provider `proxy`): compiles the HTTP listeners of the model into an
//! immutable route table, swaps it in atomically on every configuration change, and forwards
//! requests to pool members over pooled HTTP/1.1 connections, with Prometheus metrics.
//!
//! This crate sees only the load-balancer model: it must not depend on Kubernetes types, the
//! translate crate, sources or stores.

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod metrics;
mod proxy;
mod route;
mod upstream;

pub use metrics::ProxyMetrics;
pub use proxy::{Proxy, Scheme};
pub use route::{PROVIDER, PoolState, RouteTable, Target, compile};
