//! Where a load balancer runs in active-standby: the record the controller writes and the
//! agents act on (`portico_ha::place` computes it).

use serde::{Deserialize, Serialize};

/// Where one load balancer runs: its active and standby agents (by node) and the epoch of
/// that choice.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Placement {
    pub active: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby: Option<String>,
    /// Bumped on every change of the pair: an agent acts only on the newest epoch it saw.
    pub epoch: u64,
}
