//! The built-in L7 proxy (provider `proxy`): compiles the HTTP and TERMINATED_HTTPS listeners
//! of the model into an immutable route table, swaps it in atomically on every configuration
//! change, terminates TLS with certificates chosen by SNI (swapped the same way), and forwards
//! requests to pool members over pooled HTTP/1.1 connections or shared h2c connections, with
//! Prometheus metrics. Clients may speak HTTP/1.1 or HTTP/2 (ALPN over TLS, prior knowledge in
//! cleartext).
//!
//! This crate sees only the load-balancer model: it must not depend on Kubernetes types, the
//! translate crate, sources or stores.

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod access;
mod auth;
mod compress;
mod limits;
mod metrics;
mod proxy;
mod ratelimit;
mod route;
mod tls;
mod trace;
mod upstream;

pub use access::{AccessLog, Destination};
pub use metrics::ProxyMetrics;
pub use proxy::{HeavyLane, Proxy, Scheme};
pub use route::{
    Health, Outcome, PROVIDER, Pick, PoolState, RequestHeaders, RequestInfo, RouteRequest,
    RouteTable, SniTarget, Target, compile,
};
pub use tls::{CaBySecret, MaterialBySecret, SniMap};
