//! The store contract: what the controller loop and the agent loop need from a store,
//! whichever backs it ([`crate::MemoryStore`] in one process, etcd apart).
//!
//! The controller's side ([`ControllerStore`]) writes the desired state (what changed since
//! its last write, returning the revision), watches its leadership (only a leader writes),
//! takes over what a previous leader stored, and watches the agents' feedback and claims. The
//! agent's side ([`AgentStore`]) watches the desired state from the revision it has (with the
//! placements), watches whether it reaches the store, and writes its feedback. The agent's
//! side of active-standby ([`ClaimStore`]) names its process, watches the claims (`ha/`) and
//! the agents' feedback (for the peers' addresses) and changes a claim only by a
//! compare-and-swap on its revision.

use crate::kv::Entry;
use crate::{Desired, Feedback};
use bytes::Bytes;
use portico_model::{LoadBalancerId, Placement};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use tokio::sync::watch;

/// Whether a reader reaches its store; the memory store always does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreHealth {
    pub connected: bool,
    /// Why not, when not connected.
    pub detail: String,
}

impl Default for StoreHealth {
    fn default() -> Self {
        StoreHealth {
            connected: true,
            detail: String::new(),
        }
    }
}

/// What a previous leader left in the store, for the next one to take over (so that the
/// load balancers keep their addresses and agents).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    /// The VIP and floating IP of each load balancer.
    pub addresses: BTreeMap<LoadBalancerId, (Option<IpAddr>, Option<IpAddr>)>,
    pub placements: BTreeMap<LoadBalancerId, Placement>,
}

/// The agents' feedback by node, once the store listed them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Agents {
    /// False until the store answered with its list of agents: no placement before it.
    pub listed: bool,
    pub feedback: BTreeMap<String, Feedback>,
}

/// The controller's side of a store.
pub trait ControllerStore: Send {
    type Error: std::fmt::Display + Send;

    /// Whether agents run apart from the controller: then placements are part of what is
    /// written (an agent change rewrites them) and the agents' claims are watched. In one
    /// process, placements show in the admin API only.
    fn agents_apart(&self) -> bool;

    /// Whether every write is followed by a change of the agents' feedback (the one agent of
    /// the process reports each revision it serves): then the controller publishes on that
    /// change rather than right after writing.
    fn feedback_follows_writes(&self) -> bool;

    /// True while this controller leads (may write). Turns true again after a loss once it
    /// wins a new campaign.
    fn leadership(&self) -> watch::Receiver<bool>;

    /// What the store holds from the last leader. Once leading, this also takes the stored
    /// state as the base of the next [`ControllerStore::write`].
    fn stored(&mut self) -> impl Future<Output = Result<Stored, Self::Error>> + Send;

    /// Writes `desired` (what changed since this leader's last write) and returns the store's
    /// revision; `None` when nothing was written (not leading, or nothing changed).
    fn write(
        &mut self,
        desired: &Desired,
    ) -> impl Future<Output = Result<Option<u64>, Self::Error>> + Send;

    /// The agents' feedback, by node.
    fn agents(&self) -> watch::Receiver<Agents>;

    /// The agents' active-standby claims (`ha/`), as stored; empty where there are none.
    fn claims(&self) -> watch::Receiver<Claims>;

    /// Gives up leadership, if held (on shutdown, so that another controller leads at once).
    fn resign(&mut self) -> impl Future<Output = ()> + Send;
}

/// The agent's side of a store.
pub trait AgentStore {
    /// Every new desired state (with the placements), from the revision this agent has.
    fn desired(&self) -> watch::Receiver<Arc<Desired>>;

    /// Whether the store is reachable.
    fn health(&self) -> watch::Receiver<StoreHealth>;

    /// Writes this agent's feedback (it replaces its previous one).
    fn report(&self, feedback: &Feedback);
}

/// The active-standby claims (`ha/<lb>`) by load balancer, each value with the revision that
/// last wrote it. The values are opaque here (`portico-ha` reads them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claims {
    /// The store's revision this view is at (0: not listed yet).
    pub revision: i64,
    pub entries: Arc<BTreeMap<LoadBalancerId, Entry>>,
}

/// How a compare-and-swap of one claim ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimSwap {
    /// Written at this revision.
    Done(i64),
    /// The claim had moved on: what is there now (`None`: absent).
    Lost(Option<Entry>),
    /// The store did not answer (why): nothing is known of the claim.
    Unreachable(String),
}

/// The name a process's claims carry (in etcd: a lease kept alive for the process's life), so
/// that a later run of the same agent tells its own claims from an earlier run's. Kept while
/// this value lives; dropping it stops keeping it (it is never given up: a successor may have
/// taken it over).
pub struct ClaimName {
    id: i64,
    _kept: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl ClaimName {
    /// The name `id`, kept as long as `keeper` lives (`None`: nothing to keep).
    pub fn new(id: i64, keeper: Option<Box<dyn std::any::Any + Send + Sync>>) -> ClaimName {
        ClaimName { id, _kept: keeper }
    }

    pub fn id(&self) -> i64 {
        self.id
    }
}

impl std::fmt::Debug for ClaimName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimName").field("id", &self.id).finish()
    }
}

/// The agent's side of active-standby's claims. A handle is cheap to clone; every clone is
/// the same link to the store.
pub trait ClaimStore: Clone + Send + Sync + 'static {
    type Error: std::fmt::Display + Send;

    /// A new name for this process's claims (waits until the store answers once).
    fn name(&self) -> impl Future<Output = Result<ClaimName, Self::Error>> + Send;

    /// Takes over the name `id` a predecessor handed over (an upgrade) and keeps it from now
    /// on; `None` when the store no longer has it (it ran out: it names nobody now).
    fn adopt(&self, id: i64)
    -> impl Future<Output = Result<Option<ClaimName>, Self::Error>> + Send;

    /// The claims as the store holds them now.
    fn claims(&self) -> watch::Receiver<Claims>;

    /// Whether the claims are followed (an agent that does not reach the store never claims).
    fn health(&self) -> watch::Receiver<StoreHealth>;

    /// The agents' feedback, by node (the peers' heartbeat addresses).
    fn agents(&self) -> watch::Receiver<Agents>;

    /// Writes `value` as the claim of `lb` if the claim's revision is still `expect` (0: it is
    /// absent); else tells what is there. Owns its handle so that it may run on a task.
    fn swap(
        self,
        lb: LoadBalancerId,
        expect: i64,
        value: Bytes,
    ) -> impl Future<Output = ClaimSwap> + Send;
}
