//! Wiring of the process: a source (manifest files or the Kubernetes API) → translate →
//! certificates → providers (built-in proxy, haproxy), with the admin API beside them, and the
//! reporter to the Kubernetes API in Kubernetes mode.
//!
//! This is the only crate that knows every other one; nothing depends on it but the binary.

mod access_log;
mod agent;
pub mod compile;
mod controller;
mod controller_loop;
mod distributed;
mod error;
mod failover;
pub mod handover;
mod lifecycle;
mod metrics;
mod node;
pub mod offline;
mod placement;
mod providers;
mod run;
mod snapshot;
mod source;
mod tls;
mod types;

pub use distributed::{AgentSettings, ControllerSettings, agent, controller};
pub use error::AppError;
pub use failover::HaSettings;
pub use portico_dataplane_http::Destination as AccessLogDestination;
pub use portico_ha::election::Timing as HaTiming;
/// The hook through which library threads give freed memory back (the binary registers its allocator's collection).
pub use portico_model::trim;
pub use portico_provider_l4::L4Limits;
pub use providers::{HaproxySettings, haproxy_plan};
pub use run::{Settings, run};
pub use snapshot::{build_snapshot, status_addresses};
pub use source::{KubeSettings, SourceSettings, load_kubernetes_once};
pub use types::{Bound, ListenSettings, NodeSettings};
