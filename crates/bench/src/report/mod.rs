//! What was measured, checked against the targets of the "Performance" issue, as a Markdown
//! table (pure). A missed target is printed as MISSED; it never fails the run.

mod rows;
pub mod stats;
mod table;

use crate::traffic::Tally;
use std::time::Duration;

pub use rows::{notes, rows};
pub use table::render;

/// Everything measured on Portico.
#[derive(Debug, Clone, Default)]
pub struct PorticoResults {
    pub cold_start: Duration,
    pub ingresses_listed: usize,
    pub rss_kib: u64,
    pub hwm_kib: u64,
    pub ingress_changes: Vec<Option<Duration>>,
    pub endpoint_changes: Vec<Option<Duration>>,
    pub traffic: Tally,
    pub idle_rss_kib: u64,
    pub deleted_rss_kib: u64,
    /// VmHWM at the end of the run.
    pub run_hwm_kib: u64,
    /// RSS across the long series of changes.
    pub drift: crate::run::changes::Drift,
    /// Kubernetes mode: from ready until Portico's CPU use died down (its own status writes
    /// come back as watch events); `None` in file mode or when it never did.
    pub quiet_after: Option<Duration>,
    /// HTTPRoutes the admin API listed once ready.
    pub routes_listed: usize,
    pub route_changes: Vec<Option<Duration>>,
    /// Kubernetes mode: from Portico's start until every HTTPRoute had its status written;
    /// `None` in file mode, without routes, or when not within a minute.
    pub route_status: Option<Duration>,
}

/// Everything measured on nginx.
#[derive(Debug, Clone, Default)]
pub struct NginxResults {
    /// `nginx -t`, sorted.
    pub check: Vec<Duration>,
    pub start: Duration,
    pub rss_kib: u64,
    pub reloads: Vec<Option<Duration>>,
    pub traffic: Tally,
}

/// One line of the table; `met` is `None` where there is no target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub metric: String,
    pub portico: String,
    pub target: String,
    pub met: Option<bool>,
    pub nginx: String,
}

#[derive(Debug, Clone, Copy)]
pub struct Report<'a> {
    pub portico: &'a PorticoResults,
    pub nginx: &'a Result<NginxResults, String>,
    /// How many Ingresses were generated.
    pub ingresses: usize,
    /// How many HTTPRoutes were generated beside them.
    pub http_routes: usize,
}
