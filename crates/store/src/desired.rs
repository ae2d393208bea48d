//! What the store holds and hands out: the desired state (the model with its addresses and
//! the certificate material it names) at a revision, and what agents report back.

use portico_model::{Diagnostic, LoadBalancerId, Model, ObjectRef, Placement, PoolId};
use portico_tls::{CaBundle, Material};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

/// Usable key material by Secret reference (kind `Secret`), as the model's listeners name them.
pub type Certificates = BTreeMap<ObjectRef, Arc<Material>>;

/// Trusted CA bundles by Secret reference (kind `Secret`), as pools' `upstream_tls.ca` name
/// them (`proxy-ssl-secret`).
pub type CaBundles = BTreeMap<ObjectRef, Arc<CaBundle>>;

/// The desired state at one store revision.
#[derive(Debug, Clone, Default)]
pub struct Desired {
    /// The store's revision of this state; 0 before anything was written.
    pub revision: u64,
    pub model: Arc<Model>,
    pub certificates: Certificates,
    /// The CA bundles verifying pools trust.
    pub ca_bundles: CaBundles,
    /// The htpasswd entries of basic-auth Secrets (hashes, never passwords).
    pub credentials: portico_model::Credentials,
    /// Where each load balancer runs (active and standby agents, epoch), as the controller
    /// placed them; empty where nothing is placed (no agent yet). Not part of `delta`: a
    /// placement change alone does not touch the providers' configuration.
    pub placements: BTreeMap<LoadBalancerId, Placement>,
    /// What changed since the previous state a reader was handed.
    pub delta: Delta,
    /// Per load balancer whose listeners are new, the sources whose policies may differ from
    /// the listeners they replace (the translation's, or the decoder's): the rest need not be
    /// looked at. Empty: look at everything.
    pub rebuilt: portico_model::Rebuilt,
    /// Problems reading the store (a malformed value): the rest is served.
    pub diagnostics: Vec<Diagnostic>,
}

/// What changed since the previous revision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Delta {
    /// Anything may have changed.
    #[default]
    Full,
    /// Only the members of these pools changed; listeners, policies and certificates stand.
    Members(HashSet<PoolId>),
}

/// What an agent reports about what it serves: the controller's readiness, Ingress status
/// and admin API come from these, not from the translation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Feedback {
    /// The agent's node name.
    pub node: String,
    /// The store revision the agent serves; 0 before its first.
    pub revision: u64,
    /// Every provider on the agent serves its first configuration.
    pub ready: bool,
    /// False while the agent cannot reach the store (it serves its last state meanwhile).
    pub store_connected: bool,
    /// The load balancers the agent serves, by id.
    pub served: Vec<LoadBalancerId>,
    /// The agent's zone (`--zone`): placement puts a pair's agents in different zones when it
    /// can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The agent's labels (`--label key=value`): an IngressClass may select agents by them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The agent's own address for its peer's heartbeats (`--advertise-address`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertise_address: Option<IpAddr>,
    /// Problems the agent's providers found (a configuration their data plane rejected, a
    /// provider type it does not know, a store value it could not read).
    pub diagnostics: Vec<Diagnostic>,
}
