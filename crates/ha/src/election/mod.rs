//! The election of one load balancer's active agent, as seen by one agent of its pair: a pure
//! state machine (no clock, no sockets). The caller feeds it [`Input`]s with the time and
//! carries out the [`Action`]s it returns; docs/active-standby.md gives the design.
//!
//! - The claim `ha/<lb>` in etcd (`holder`, `epoch`) says who is active. It changes only by a
//!   compare-and-swap on its revision, and an agent adds addresses only after its own swap to a
//!   new epoch succeeded; so two agents never both win an epoch.
//! - The pair exchange adverts every `interval`. The standby takes over when it heard no advert
//!   of an active peer for `dead` (3 intervals + skew), saw the claim unchanged for as long, and
//!   reaches etcd; an agent that does not reach etcd never claims.
//! - An active that no longer hears its peer renews the claim every interval (so the standby
//!   sees it alive), and drops its addresses when it has neither heard its peer for `fence` nor
//!   had the claim confirmed by a swap sent within `confirmed_fence` (both < `dead`): it is gone
//!   before the standby may claim.
//! - It steps down at once when it sees the claim held by another or a peer active at a
//!   higher epoch; on shutdown it removes its addresses and releases (advert and claim).
//! - A claim is this agent's only when it names both its node and its process's etcd lease:
//!   one that names the node under another lease was written by an earlier run (killed, then
//!   started again), which holds nothing now; it is taken like a dead peer's, through the
//!   election, never at once.

mod wire;

pub use wire::{Advert, AdvertRole, MAX_LEN, VERSION, WireError};

use portico_model::LoadBalancerId;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// How often the caller should tick the election.
pub const TICK: Duration = Duration::from_millis(5);

/// The election's clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Between adverts (and claim renewals while the peer is silent).
    pub interval: Duration,
    /// Adverts missed before the peer counts as gone.
    pub misses: u32,
    /// Added to `misses × interval` (keepalived's skew).
    pub skew: Duration,
    /// Gratuitous ARP requests sent on takeover, `garp_spacing` apart.
    pub garp_count: u32,
    pub garp_spacing: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            interval: Duration::from_millis(50),
            misses: 3,
            skew: Duration::from_millis(50),
            garp_count: 5,
            garp_spacing: Duration::from_millis(200),
        }
    }
}

impl Timing {
    /// Silence after which the peer counts as gone: `misses × interval + skew`.
    pub fn dead(&self) -> Duration {
        self.interval * self.misses + self.skew
    }

    /// An active drops its addresses when it has neither heard its peer nor had its claim
    /// confirmed for this long: `dead − interval − skew / 2`, so before the standby may claim
    /// even when their last adverts were an interval apart.
    pub fn fence(&self) -> Duration {
        self.dead()
            .saturating_sub(self.interval)
            .saturating_sub(self.skew / 2)
    }

    /// An active whose claim was last confirmed by a swap sent at `t` drops its addresses at
    /// `t` + this (`dead − skew / 2`): the swap committed after `t`, and the standby claims
    /// only after it saw the claim unchanged for `dead`.
    pub fn confirmed_fence(&self) -> Duration {
        self.dead().saturating_sub(self.skew / 2)
    }

    /// An active renews its claim when its peer has been silent this long.
    pub fn renew_after(&self) -> Duration {
        self.interval + self.interval / 5
    }
}

/// This agent's part in the load balancer's placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Placed as active: claims a claim nobody of the pair holds at once.
    Active,
    Standby,
}

/// The placement as this agent sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub role: Role,
    /// The other agent of the pair, if any.
    pub peer: Option<String>,
    /// The placement's epoch (for display; the claim's epoch fences).
    pub epoch: u64,
}

/// The value of `ha/<lb>` in etcd.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub holder: String,
    pub epoch: u64,
    /// The etcd lease of the holder's process (0: unknown, written by an older Portico): a
    /// claim naming this node under another lease is an earlier run's, not this one's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lease: i64,
    /// The holder gave it up (shutdown): anyone of the pair may take it at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub released: bool,
}

fn is_zero(lease: &i64) -> bool {
    *lease == 0
}

/// A claim read from etcd with its mod revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub claim: Claim,
    pub revision: i64,
}

/// How the last [`Action::Claim`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Written at this revision.
    Done(i64),
    /// The revision had moved on: the claim as it is now (`None`: absent).
    Lost(Option<Seen>),
    /// etcd did not answer.
    Failed,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// The placement changed (`None`: this agent no longer serves the load balancer).
    Placement(Option<Assignment>),
    Advert(Advert),
    /// The claim as etcd has it now (`None`: absent), from a read or a watch.
    Claim(Option<Seen>),
    /// Whether etcd is reachable; after `false`, the claim counts as unknown until the next
    /// [`Input::Claim`].
    Etcd(bool),
    /// The end of the last [`Action::Claim`].
    Outcome(Outcome),
    Tick,
    Shutdown,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    AddAddresses,
    RemoveAddresses,
    /// One round of gratuitous ARP requests for every address.
    Garp,
    Advert(Advert),
    /// Write `claim` to `ha/<lb>` if its mod revision is still `expect` (0: absent); answer
    /// with [`Input::Outcome`].
    Claim {
        expect: i64,
        claim: Claim,
    },
}

/// What a caller may show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// This agent holds the addresses.
    pub holding: bool,
    /// The claim's holder and epoch as last seen.
    pub holder: Option<String>,
    pub epoch: u64,
    /// The claim's mod revision as last seen (0: none).
    pub revision: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Takeover,
    Renew,
}

/// One agent's election for one load balancer.
#[derive(Debug)]
pub struct Election {
    node: String,
    /// This process's etcd lease: its claims carry it.
    lease: i64,
    lb: LoadBalancerId,
    timing: Timing,
    assignment: Option<Assignment>,
    assigned_at: Instant,
    claim: Option<Seen>,
    claim_known: bool,
    claim_changed_at: Instant,
    etcd: bool,
    peer_active_at: Option<Instant>,
    /// The last advert that said it hears this agent.
    peer_heard_at: Option<Instant>,
    /// The last advert at all.
    peer_any_at: Option<Instant>,
    peer_released_at: Option<Instant>,
    holding: bool,
    epoch: u64,
    confirmed_at: Instant,
    pending: Option<(Pending, Instant, Claim)>,
    next_advert: Instant,
    next_renew: Instant,
    garps_left: u32,
    next_garp: Instant,
    stopped: bool,
    /// When [`Election::handing_over`] was first called: the peer counts as heard as it was
    /// then.
    handing_over_at: Option<Instant>,
}

mod rules;

#[cfg(test)]
mod tests;
