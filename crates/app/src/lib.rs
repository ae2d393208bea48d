//! Wiring of the all-in-one process: manifest source → translate → certificates → built-in
//! proxy, with the admin API beside them, and the echo backends the demo and the tests use.
//!
//! This is the only crate that knows every other one; nothing depends on it but the binary.

pub mod echo;
mod metrics;
mod providers;
mod run;
mod snapshot;
mod tls;

pub use providers::{HaproxySettings, haproxy_plan};
pub use run::{AppError, Bound, KubeSettings, Settings, SourceSettings, run};
pub use snapshot::{build_snapshot, status_addresses};
